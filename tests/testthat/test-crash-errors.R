# Errors found before anything is written reach R as conditions with the Python message
# (issue 13: a model function that cannot be imported used to fail after TensorFlow start-up
# and leave a failed run).

test_that("tpu_train with a model that cannot be imported fails up front, writing nothing", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  case <- jsonlite::read_json(fixture_path("bad_data.json"))$cases
  case <- Filter(function(x) identical(x$name, "negative_pixel"), case)[[1]]
  cfg <- bad_data_config(case)
  cfg$model <- "nosuchmodule:build"
  err <- tryCatch(
    quietly(tpu_train(cfg, verbose = FALSE, runs_dir = "runs", model_dir = "models/bad_model")),
    error = function(e) e
  )
  expect_s3_class(err, "tpuestimator_config_error")
  expect_identical(err$field, "model")
  expect_identical(err$value, "nosuchmodule:build")
  expect_match(conditionMessage(err), "no module `nosuchmodule` was found", fixed = TRUE)
  expect_match(conditionMessage(err), "cnn, image_classifier, linear, mlp", fixed = TRUE)
  expect_false(dir.exists("runs"))
  expect_false(dir.exists("models/bad_model"))
})
