test_that("tpu_config() loads, fills defaults and applies overrides", {
  skip_if_no_tpuestimator()
  path <- tpu_example("digits", dir = tempfile())
  cfg <- tpu_config(path, train.max_steps = 300, params.learning_rate = 0.01)
  expect_s3_class(cfg, "tpu_config")
  expect_identical(cfg$train$max_steps, 300L)
  expect_equal(cfg$params$learning_rate, 0.01)
  expect_identical(cfg$run$runs_dir, "runs")           # a default filled in
  expect_true(file.exists(cfg$data$train))             # resolved against the config's folder
  expect_identical(attr(cfg, "tpu_overrides"), c("train.max_steps=300", "params.learning_rate=0.01"))
  cfg2 <- tpu_config(cfg, train.batch_size = 32L)      # more overrides on a tpu_config
  expect_identical(cfg2$train$batch_size, 32L)
  expect_identical(cfg2$train$max_steps, 300L)
  expect_output(print(cfg), "<tpu_config> digits")
  lst <- as.list(cfg)
  expect_null(attr(lst, "tpu_source"))
  expect_identical(lst$export$exporters, list("final", "best"))  # lists stay lists
})

test_that("a list config validates like a file", {
  skip_if_no_tpuestimator()
  cfg <- tpu_config(list(model = "linear", data = list(manifest = fixture_path("parity", "manifest.json"))))
  expect_identical(cfg$model, "linear")
  expect_identical(cfg$name, "job")
})

test_that("config errors are tpuestimator_config_error conditions naming the field", {
  skip_if_no_tpuestimator()
  path <- tpu_example("digits", dir = tempfile())
  err <- expect_error(tpu_config(path, train.batch_size = 0L), class = "tpuestimator_config_error")
  expect_s3_class(err, "tpuestimator_error")
  expect_identical(err$field, "train.batch_size")
  expect_identical(err$value, 0L)
  expect_match(conditionMessage(err), "^ConfigError: `train.batch_size`")
  expect_match(conditionMessage(err), "Received: train.batch_size=0")

  err <- expect_error(tpu_config(path, train.max_step = 5L), class = "tpuestimator_config_error")
  expect_identical(err$field, "train.max_step")
  expect_match(conditionMessage(err), "did you mean `max_steps`")

  err <- expect_error(tpu_config(list(model = "cnn", data = list(format = "mnst"))),
                      class = "tpuestimator_config_error")
  expect_identical(err$field, "data.format")

  err <- expect_error(tpu_config(path, run.strategy = "tpu"), class = "tpuestimator_config_error")
  expect_identical(err$field, "run.tpu")

  # An edited tpu_config is validated again when used.
  cfg <- tpu_config(path)
  cfg$eval$every_n_steps <- 150L
  err <- expect_error(tpu_check(cfg), class = "tpuestimator_config_error")
  expect_identical(err$field, "eval.every_n_steps")
})

test_that("an unknown model name is a config error naming `model`", {
  skip_if_no_tpuestimator()
  local_work_dir()
  path <- tpu_example("digits", dir = "ex")
  err <- expect_error(quietly(tpu_train(path, model_fn = "no_such_model", train.max_steps = 10L, verbose = FALSE)),
                      class = "tpuestimator_config_error")
  expect_identical(err$field, "model")
})

test_that("every bad config of tests/fixtures/bad_configs.yaml fails from R naming its field", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  bad <- yaml::read_yaml(fixture_path("bad_configs.yaml"))
  expect_gte(length(bad$cases), 10L)
  drop_field <- function(x, path) {
    if (length(path) == 1L) {
      x[[path]] <- NULL
    } else {
      x[[path[[1]]]] <- drop_field(x[[path[[1]]]], path[-1])
    }
    x
  }
  for (case in bad$cases) {
    raw <- bad$base
    for (dotted in unlist(case$drop)) raw <- drop_field(raw, strsplit(dotted, ".", fixed = TRUE)[[1]])
    err <- tryCatch(do.call(tpu_config, c(list(raw), as.list(unlist(case$set)))), error = function(e) e)
    expect_s3_class(err, "tpuestimator_config_error")
    expect_identical(err$field, case$field, info = case$name)
    for (text in unlist(case$message)) {
      expect_true(grepl(text, conditionMessage(err), fixed = TRUE),
                  info = paste0(case$name, ": \"", text, "\" not in: ", conditionMessage(err)))
    }
  }
})

test_that("tpu_train() of an unchanged tpu_config() validates nothing again; each job resolves its data once", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  counts <- local_config_counts()
  cfg <- tpu_config(fixture_path("parity", "parity.yaml"), train.max_steps = 10L, eval.every_n_steps = 10L)
  expect_equal(counts(), list(resolve = 0L, validate = 1L))  # tpu_config() validated it
  run <- tpu_train(cfg, model_dir = file.path(work, "m"), runs_dir = file.path(work, "runs"), verbose = FALSE)
  expect_equal(counts(), list(resolve = 1L, validate = 1L))
  expect_equal(run$global_step, 10L)
  # this call's flags and overrides: the one validation of this job, and its own data resolution
  run2 <- tpu_train(cfg, flags = list(max_steps = 20L), params.learning_rate = 0.3, model_dir = file.path(work, "m2"),
                    runs_dir = file.path(work, "runs"), verbose = FALSE)
  expect_equal(counts(), list(resolve = 2L, validate = 2L))
  expect_equal(run2$global_step, 20L)
  expect_equal(run2$config$params$learning_rate, 0.3)
  # an edited one is the edited list, validated for the job
  cfg$train$max_steps <- 5L
  run3 <- tpu_train(cfg, model_dir = file.path(work, "m3"), runs_dir = file.path(work, "runs"), verbose = FALSE)
  expect_equal(counts(), list(resolve = 3L, validate = 3L))
  expect_equal(run3$global_step, 5L)
})

test_that("tpu_train(data frame, flags =) validates the table's config once", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  counts <- local_config_counts()
  cars <- mtcars[, c("mpg", "wt", "hp")]
  run <- tpu_train(mpg ~ ., data = cars, model = "linear", flags = list(learning_rate = 0.02, max_steps = 6L),
                   early_stopping = FALSE, model_dir = file.path(work, "cars"), runs_dir = file.path(work, "runs"),
                   verbose = FALSE)
  expect_equal(counts(), list(resolve = 1L, validate = 1L))
  expect_equal(run$global_step, 6L)
  expect_equal(run$config$params$learning_rate, 0.02)
})
