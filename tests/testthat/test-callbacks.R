# Model functions and hooks written in R, called by Python through reticulate.

r_model_fn <- function(params) {
  keras <- reticulate::import("keras")
  model <- keras$Sequential(list(
    keras$layers$Input(shape = list(4L)),
    keras$layers$Dense(8L, activation = "relu"),
    keras$layers$Dense(as.integer(params$num_classes))
  ))
  tpuestimator$ModelSpec(
    model = model,
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE, reduction = NULL),
    optimizer = keras$optimizers$SGD(params$learning_rate),
    metrics = list(accuracy = keras$metrics$SparseCategoricalAccuracy())
  )
}

parity_cfg <- function() tpu_config(fixture_path("parity", "parity.yaml"))

test_that("an R model function and an R hook drive a training", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  seen <- new.env()
  seen$params <- NULL
  seen$events <- character()
  seen$metrics <- NULL
  fn <- function(params) {
    seen$params <- params
    r_model_fn(params)
  }
  hook <- function(event, info) {
    seen$events <- c(seen$events, event)
    if (event == "after_eval") seen$metrics <- info$metrics
    NULL
  }
  progress_events <- character()
  run <- quietly(tpu_train(parity_cfg(), model_fn = fn, hooks = list(hook), verbose = FALSE,
                           progress = function(event, info) progress_events <<- c(progress_events, event)))
  expect_s3_class(run, "tpu_run")
  expect_identical(run$global_step, 40L)
  expect_true(is.finite(run$metrics$loss))
  expect_true("accuracy" %in% names(run$metrics))
  # params reached R as an R list, with what the data defines
  expect_identical(seen$params$num_classes, 3L)
  expect_equal(seen$params$learning_rate, 0.1)
  expect_true(all(c("batch_size", "global_batch_size", "num_replicas") %in% names(seen$params)))
  # every hook event, after_eval included
  expect_true(all(c("begin", "before_loop", "after_loop", "after_eval", "end") %in% seen$events))
  expect_equal(sum(seen$events == "after_loop"), 4L)
  expect_equal(seen$metrics$loss, run$metrics$loss, tolerance = 1e-6)
  expect_true(all(c("begin", "loop", "eval", "end") %in% progress_events))
})

test_that("an R hook can stop training by returning \"stop\"", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  hook <- function(event, info) if (event == "after_loop" && info$step >= 20L) "stop"
  run <- quietly(tpu_train(parity_cfg(), hooks = hook, verbose = FALSE))
  expect_identical(run$global_step, 20L)
})

test_that("an error in an R model function reaches R with its message", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  broken <- function(params) stop("cannot build the model for ", params$num_classes, " classes")
  err <- expect_error(quietly(tpu_train(parity_cfg(), model_fn = broken, verbose = FALSE)),
                      class = "tpuestimator_callback_error")
  expect_s3_class(err, "tpuestimator_error")
  expect_match(conditionMessage(err), "cannot build the model for 3 classes", fixed = TRUE)
  expect_match(conditionMessage(err), "R model function")
  expect_s3_class(err$parent, "simpleError")
  # the failed run is recorded as failed
  run <- tpu_latest_run()
  expect_false(run$completed)
  expect_match(run$error$message, "cannot build the model for 3 classes", fixed = TRUE)
})

test_that("a custom R condition class survives the trip through Python", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  broken <- function(params) {
    stop(structure(class = c("my_model_error", "error", "condition"),
                   list(message = "custom failure", call = NULL)))
  }
  err <- expect_error(quietly(tpu_train(parity_cfg(), model_fn = broken, verbose = FALSE)),
                      class = "my_model_error")
  expect_match(conditionMessage(err), "custom failure")
})

test_that("an error in an R hook reaches R with its message", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  hook <- function(event, info) if (event == "after_loop") stop("hook failed at step ", info$step)
  err <- expect_error(quietly(tpu_train(parity_cfg(), hooks = hook, verbose = FALSE)),
                      class = "tpuestimator_callback_error")
  expect_match(conditionMessage(err), "hook failed at step 10", fixed = TRUE)
  expect_match(conditionMessage(err), "R hook 1")
})

test_that("a model function that breaks the contract is a tpuestimator_model_fn_error", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  keras <- reticulate::import("keras")
  no_optimizer <- function(params) {
    tpuestimator$ModelSpec(
      model = keras$Sequential(list(keras$layers$Input(shape = list(4L)), keras$layers$Dense(3L))),
      loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE, reduction = NULL),
      optimizer = NULL
    )
  }
  err <- expect_error(quietly(tpu_train(parity_cfg(), model_fn = no_optimizer, verbose = FALSE)),
                      class = "tpuestimator_model_fn_error")
  expect_s3_class(err, "tpuestimator_callback_error")
  expect_match(conditionMessage(err), "ModelSpec.optimizer is required")
})

test_that("with an R model function a list config may leave out `model`", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  cfg <- list(params = list(learning_rate = 0.1), data = list(manifest = fixture_path("parity", "manifest.json")),
              train = list(batch_size = 16L, max_steps = 10L, iterations_per_loop = 10L, save_checkpoints_steps = 10L))
  run <- quietly(tpu_train(cfg, model_fn = r_model_fn, verbose = FALSE))
  expect_identical(run$global_step, 10L)
  expect_identical(run$config$model, "r:model_fn")
  expect_identical(tpu_ls_runs()$flag_model, "r:model_fn")
})
