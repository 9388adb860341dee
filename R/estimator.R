#' An estimator for users of tfestimators
#'
#' `tpu_estimator()` bundles a model function, a configuration and a model folder,
#' so code written for the tfestimators R package keeps its shape:
#' `train()`, `evaluate()`, `predict()` and `export_savedmodel()` work on it. Each
#' `train()` call is one [tpu_train()] job (recorded as a run); the model folder
#' keeps the checkpoints, so later calls continue from the last step.
#'
#' @section Migrating from tfestimators:
#' tfestimators (TensorFlow 1's `tf.estimator` for R) no longer works with
#' TensorFlow 2.16 and later. The calls map as follows; the input functions of
#' tfestimators become the `data` section of the configuration (TFRecord files;
#' write them from R data with [tpu_write_tfrecords()]).
#'
#' | tfestimators | tpuestimatorr |
#' | --- | --- |
#' | `estimator(model_fn, model_dir = d, params = p)` | `tpu_estimator(model_fn, cfg, model_dir = d, params = p)` |
#' | `linear_classifier(feature_columns = ...)` | `tpu_estimator(config = tpu_config(list(model = "linear", ...)))` |
#' | `dnn_classifier(hidden_units = ...)` | `model = "mlp"` with `params: {hidden_units: [...]}` |
#' | `model_fn(features, labels, mode, params, config)` -> `estimator_spec()` | `model_fn(params)` -> `ModelSpec` (*) |
#' | `input_fn(data, features, response)` | `data:` section (`format`, `train`, `eval` globs or `manifest`) |
#' | `train(est, input_fn, steps = 1000)` | `train(est, steps = 1000)` |
#' | `train(est, input_fn, max_steps = 1000)` | `train(est, max_steps = 1000)` |
#' | `evaluate(est, input_fn)` | `evaluate(est)` or `evaluate(est, data = "eval-*.tfrecord")` |
#' | `predict(est, input_fn)` | `predict(est, newdata)` (data frame, matrix, array or TFRecord paths) |
#' | `export_savedmodel(est, export_dir_base)` | `export_savedmodel(est, export_dir_base)` |
#' | `train_and_evaluate(est, train_spec, eval_spec)` | `train(est)` with `eval.every_n_steps` set |
#' | hooks (`hook_*()`, `session_run_hook()`) | R functions `function(event, info)` in `hooks =` |
#' | `run_config(save_checkpoints_steps = ...)` | `train.save_checkpoints_steps` in the configuration |
#' | `tpu_config(iterations_per_loop = ...)` (TPUEstimator) | `train.iterations_per_loop` |
#' | tfruns `ls_runs()`, `view_run()`, `compare_runs()` | tfruns's own, or `tpu_ls_runs()`, ... |
#'
#' (*) `tpuestimator$ModelSpec(model = , loss = , optimizer = )`: one Keras model for every mode.
#'
#' @section train(), evaluate() and export_savedmodel() beside tensorflow:
#' The tensorflow R package (and tfestimators, which re-exports them) has
#' generics of the same names. Whichever package was attached last, the call
#' does the same: this package registers its `tpu_estimator` methods with
#' tensorflow's generics when tensorflow is loaded, and its own generics hand
#' any other object to tensorflow's. See [tpuestimatorr-names].
#'
#' @param model_fn `NULL` (use the configuration's `model`), an R function
#'   `function(params)` returning `tpuestimator$ModelSpec(...)`, a Python callable,
#'   or a built-in model name.
#' @param config A [tpu_config()], a path to a configuration file or a named list.
#' @param model_dir The model folder (checkpoints, exports). Default: the
#'   configuration's `run.model_dir`, else `models/<name>` (made absolute now).
#' @param params A named list of hyperparameters merged into the configuration's
#'   `params`.
#' @return A `tpu_estimator` object (an environment: it remembers its last run in
#'   `$run`).
#' @seealso [tpu_train()]
#' @examples
#' if (tpuestimator_available()) {
#'   out <- tempfile("est-")
#'   est <- tpu_estimator(config = tpu_example("digits", dir = file.path(out, "example")),
#'                        model_dir = file.path(out, "model"))
#'   train(est, max_steps = 100L, verbose = FALSE, runs_dir = file.path(out, "runs"))
#'   evaluate(est)
#'   predict(est, array(runif(3 * 64), dim = c(3, 8, 8, 1)))
#' }
#' @export
tpu_estimator <- function(model_fn = NULL, config, model_dir = NULL, params = NULL) {
  if (missing(config)) arg_error("config", NULL, "a tpu_config, a configuration file or a named list")
  if (is.list(config) && !inherits(config, "tpu_config") && !is.null(model_fn) && is.null(config$model)) {
    # A 'module:function'-shaped placeholder passes validation; the R function is used instead.
    config$model <- if (is.character(model_fn)) model_fn else "r:model_fn"
  }
  cfg <- tpu_config(config)
  if (!is.null(params)) {
    if (!is.list(params) || is.null(names(params))) arg_error("params", params, "a named list")
    cfg <- do.call(tpu_config, c(list(cfg), stats::setNames(params, paste0("params.", names(params)))))
  }
  if (is.character(model_fn)) {
    cfg <- tpu_config(cfg, model = model_fn)
    model_fn <- NULL
  }
  model_fn <- as_nullable_function(model_fn, "model_fn")
  model_dir <- as_nullable_path(model_dir, "model_dir") %||%
    normalizePath(cfg$run$model_dir %||% file.path("models", cfg$name), winslash = "/", mustWork = FALSE)
  est <- new.env(parent = emptyenv())
  est$model_fn <- model_fn
  est$config <- cfg
  est$model_dir <- model_dir
  est$run <- NULL
  class(est) <- "tpu_estimator"
  est
}

#' @export
print.tpu_estimator <- function(x, ...) {
  cat("<tpu_estimator> ", x$config$name %||% "job", "\n", sep = "")
  model <- if (is.function(x$model_fn)) "R model function" else if (!is.null(x$model_fn)) "Python callable"
  cat("  model:     ", model %||% x$config$model, "\n", sep = "")
  cat("  model dir: ", x$model_dir, "\n", sep = "")
  if (!is.null(x$run)) cat("  last run:  ", x$run$run_dir, "\n", sep = "")
  invisible(x)
}

#' Train a model
#'
#' Generic for training; the method for [tpu_estimator()] objects runs one
#' [tpu_train()] job in the estimator's model folder.
#'
#' @param object The model (a `tpu_estimator`).
#' @param ... Arguments for the method.
#' @param steps Steps to train on top of the current global step
#'   (`train.steps`).
#' @param max_steps Global step to stop at (`train.max_steps`).
#' @param hooks Hooks, as in [tpu_train()].
#' @return The `tpu_run` of the job, invisibly (also stored in `object$run`).
#' @seealso [tpu_estimator()]
#' @export
train <- function(object, ...) UseMethod("train")

#' @rdname train
#' @export
train.default <- function(object, ...) forward_to_foreign_generic("train", object, ...)

#' @rdname train
#' @export
train.tpu_estimator <- function(object, steps = NULL, max_steps = NULL, hooks = NULL, ...) {
  steps <- as_nullable_integer(steps, "steps")
  max_steps <- as_nullable_integer(max_steps, "max_steps")
  if (!is.null(steps) && !is.null(max_steps)) {
    stop("Pass either `steps` (incremental) or `max_steps` (absolute), not both. Received: steps = ",
         steps, ", max_steps = ", max_steps, ".", call. = FALSE)
  }
  # Named overrides: unnamed ones would bind to tpu_train()'s positional arguments.
  overrides <- list()
  if (!is.null(steps)) overrides <- list(train.steps = steps, train.max_steps = NULL)
  if (!is.null(max_steps)) overrides <- list(train.max_steps = max_steps, train.steps = NULL)
  run <- do.call(tpu_train, c(
    list(object$config, model_fn = object$model_fn, hooks = hooks, model_dir = object$model_dir),
    list(...), overrides
  ))
  object$run <- run
  invisible(run)
}

#' Evaluate a model
#'
#' Generic for evaluation; the method for [tpu_estimator()] objects calls
#' [tpu_evaluate()] on the estimator's model folder.
#'
#' @param object The model (a `tpu_estimator`).
#' @param ... Arguments for the method.
#' @param data `NULL` (the configured evaluation data) or a glob of TFRecord files.
#' @return A named list of metrics.
#' @export
evaluate <- function(object, ...) UseMethod("evaluate")

#' @rdname evaluate
#' @export
evaluate.default <- function(object, ...) forward_to_foreign_generic("evaluate", object, ...)

#' @rdname evaluate
#' @export
evaluate.tpu_estimator <- function(object, data = NULL, ...) {
  tpu_evaluate(object$run %||% object$model_dir, data = data)
}

#' Predict with a tpu_estimator
#'
#' The [stats::predict()] method for [tpu_estimator()] objects: [tpu_predict()] on
#' the estimator's latest export (or model folder).
#'
#' @param object A `tpu_estimator`.
#' @param newdata A data frame, matrix, array, named list or TFRecord file paths.
#' @param ... Unused.
#' @return A data frame of predictions (see [tpu_predict()]).
#' @importFrom stats predict
#' @export
predict.tpu_estimator <- function(object, newdata, ...) {
  tpu_predict(object$run %||% object$model_dir, newdata)
}

#' Export a SavedModel
#'
#' Generic for exporting; the method for [tpu_estimator()] objects calls
#' [tpu_export()] on the estimator's model folder.
#'
#' @param object The model (a `tpu_estimator`).
#' @param export_dir_base Folder to write the export into.
#' @param ... Arguments for the method (for `tpu_estimator`: `quantize`,
#'   `warmup`, passed to [tpu_export()]).
#' @param format `"saved_model"` or `"tflite"`.
#' @return The export's path, invisibly.
#' @export
export_savedmodel <- function(object, export_dir_base, ...) UseMethod("export_savedmodel")

#' @rdname export_savedmodel
#' @export
export_savedmodel.default <- function(object, export_dir_base, ...) {
  if (missing(export_dir_base)) return(forward_to_foreign_generic("export_savedmodel", object, ...))
  forward_to_foreign_generic("export_savedmodel", object, export_dir_base, ...)
}

#' @rdname export_savedmodel
#' @export
export_savedmodel.tpu_estimator <- function(object, export_dir_base, format = c("saved_model", "tflite"), ...) {
  tpu_export(object$run %||% object$model_dir, export_dir_base, format = match.arg(format), ...)
}
