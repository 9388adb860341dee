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
  expect_match(conditionMessage(err), "cnn, dnn, image_classifier, linear, mlp, wide_and_deep", fixed = TRUE)
  expect_false(dir.exists("runs"))
  expect_false(dir.exists("models/bad_model"))
})

test_that("a full disk reaches R as tpuestimator_disk_full_error with its fields", {
  skip_if_no_tpuestimator()
  # the translation a checkpoint or run-record write goes through, fed a real ENOSPC OSError
  diskspace <- reticulate::import("tpuestimator.system.diskspace")
  builtins <- reticulate::import_builtins()
  translation <- diskspace$translate_disk_full(tempdir(), "checkpoint of step 150",
                                               kept = "The last complete checkpoint is intact.")
  translation$`__enter__`()
  enospc <- builtins$OSError(28L, "No space left on device")
  err <- tryCatch(
    tpuestimatorr:::with_python(translation$`__exit__`(builtins$OSError, enospc, NULL)),
    error = function(e) e
  )
  expect_s3_class(err, "tpuestimator_disk_full_error")
  expect_s3_class(err, "tpuestimator_error")
  expect_match(conditionMessage(err), "No space left on the disk holding", fixed = TRUE)
  expect_match(conditionMessage(err), "while writing the checkpoint of step 150", fixed = TRUE)
  expect_match(conditionMessage(err), "The last complete checkpoint is intact.", fixed = TRUE)
  expect_identical(err$what, "checkpoint of step 150")
  expect_true(is.numeric(err$free_bytes) && err$free_bytes > 0)
})
