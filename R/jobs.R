# Wrappers of the job-level Python API: evaluate, predict, export, check, data, examples.

# A run (tpu_run, ls_runs() row, run folder or model folder) -> path for Python.
run_target <- function(run, name = "run", prefer = c("model_dir", "run_dir", "export_dir")) {
  prefer <- match.arg(prefer)
  if (inherits(run, "tpu_run")) {
    order <- unique(c(prefer, "model_dir", "run_dir", "export_dir"))
    for (field in order) {
      value <- run[[field]]
      if (is.character(value) && length(value) == 1L && !is.na(value) && nzchar(value)) return(value)
    }
    arg_error(name, run$run_dir, "a run with a model_dir or run_dir")
  }
  if (inherits(run, "tpu_estimator")) {
    return(run$model_dir %||% arg_error(name, "tpu_estimator", "an estimator that has been trained"))
  }
  if (is.data.frame(run)) {
    if (nrow(run) < 1L || is.null(run$run_dir)) arg_error(name, run, "a row of ls_runs()")
    return(run_target(run_info(run$run_dir[[1]]), name, prefer))
  }
  if (is.character(run) && length(run) == 1L && !is.na(run)) {
    path <- normalizePath(path.expand(run), mustWork = FALSE)
    if (!file.exists(path)) {
      stop("`", name, "` must be a run, a run folder or a model folder. Received: ", name, " = \"",
           run, "\" (no such folder). See ls_runs() for the runs recorded here.", call. = FALSE)
    }
    if (dir.exists(file.path(path, "tfruns.d"))) return(run_target(run_info(path), name, prefer))
    return(path)
  }
  arg_error(name, run, "a tpu_run (from tpu_train() or latest_run()), an ls_runs() row or a folder path")
}

#' Evaluate a trained model
#'
#' Evaluates the latest checkpoint of a run's model on its configured evaluation
#' data, or on other TFRecord files (`tpuestimator.job.evaluate_job()`).
#'
#' @param run A `tpu_run` (from [tpu_train()] or [latest_run()]), a row of
#'   [ls_runs()], a run folder or a model folder.
#' @param data `NULL` (the configuration's `data.eval`), or a glob of TFRecord files
#'   in the same format as the training data (see [tpu_write_tfrecords()]).
#' @return A named list of metrics (`loss`, `accuracy`, ...).
#' @examples
#' if (tpuestimator_available()) {
#'   withr::with_dir(tempdir(), {
#'     run <- tpu_train(tpu_example("digits"), train.max_steps = 100L, verbose = FALSE)
#'     tpu_evaluate(run)
#'   })
#' }
#' @export
tpu_evaluate <- function(run, data = NULL) {
  target <- run_target(run, "run")
  data <- as_nullable_data_pattern(data)
  job <- py_mod("job", convert = FALSE)
  res <- with_python(job$evaluate_job(target, data_pattern = data))
  as.list(py_to_r_json(res))
}

as_nullable_data_pattern <- function(data) {
  if (is.null(data)) return(NULL)
  if (!is.character(data) || anyNA(data) || !length(data)) {
    arg_error("data", data, "NULL or a glob of TFRecord files, e.g. \"data/eval-*.tfrecord\"")
  }
  if (length(data) > 1L) data <- paste(normalizePath(data, mustWork = FALSE), collapse = ",")
  data
}

#' Predict with a trained or exported model
#'
#' Runs the exported SavedModel (or the latest export of a run) on new data
#' (`tpuestimator.job.predict()`) and returns one row per example.
#'
#' @param run_or_export A `tpu_run`, a row of [ls_runs()], a run folder, a model
#'   folder or a SavedModel export folder.
#' @param newdata The examples: a data frame (one column per feature), a matrix or
#'   array whose first dimension indexes examples (for a model with a single input,
#'   e.g. images `[n, height, width, channels]` or flattened `[n, height * width]`),
#'   a named list of arrays, or a character vector of TFRecord file paths.
#' @return A data frame with one row per example: `class_id` (the predicted label
#'   id, counted from 0 as in the data), `class` (its name, when the model has a
#'   vocabulary), and one `prob_<class>` column per class (or the model's other
#'   outputs).
#' @examples
#' if (tpuestimator_available()) {
#'   withr::with_dir(tempdir(), {
#'     run <- tpu_train(tpu_example("digits"), train.max_steps = 100L, verbose = FALSE)
#'     images <- array(runif(2 * 8 * 8), dim = c(2, 8, 8, 1))
#'     tpu_predict(run, images)
#'   })
#' }
#' @export
tpu_predict <- function(run_or_export, newdata) {
  target <- run_target(run_or_export, "run_or_export", prefer = "export_dir")
  if (missing(newdata) || is.null(newdata)) {
    arg_error("newdata", NULL, "a data frame, matrix, array, named list or TFRecord file paths")
  }
  features <- as_py_features(newdata)
  job <- py_mod("job", convert = FALSE)
  res <- with_python(job$predict(target, features))
  predictions_to_df(res)
}

# R data -> what tpuestimator.job.predict() takes as `features`.
as_py_features <- function(newdata) {
  np <- reticulate::import("numpy", convert = FALSE)
  if (is.character(newdata) && is.null(dim(newdata))) {
    missing_files <- newdata[!file.exists(newdata) & !grepl("[*?]", newdata)]
    if (length(missing_files)) {
      stop("`newdata` holds file paths that do not exist: ", paste(missing_files, collapse = ", "),
           ". Pass TFRecord files, or a data frame/matrix/array of features.", call. = FALSE)
    }
    return(reticulate::r_to_py(as.list(normalizePath(newdata, mustWork = FALSE))))
  }
  if (is.data.frame(newdata)) {
    cols <- lapply(names(newdata), function(n) column_to_numpy(newdata[[n]], n, np))
    names(cols) <- names(newdata)
    return(reticulate::dict(cols))
  }
  if (is.list(newdata)) {
    if (is.null(names(newdata)) || any(!nzchar(names(newdata)))) {
      arg_error("newdata", newdata, "a named list of feature arrays")
    }
    cols <- lapply(names(newdata), function(n) column_to_numpy(newdata[[n]], n, np))
    names(cols) <- names(newdata)
    return(reticulate::dict(cols))
  }
  if (is.numeric(newdata) || is.logical(newdata)) {
    if (is.null(dim(newdata))) newdata <- matrix(newdata, nrow = 1L)
    storage.mode(newdata) <- "double"
    return(np$asarray(reticulate::r_to_py(newdata), dtype = "float32"))
  }
  arg_error("newdata", newdata, "a data frame, matrix, array, named list or TFRecord file paths")
}

column_to_numpy <- function(x, name, np) {
  if (is.factor(x)) x <- as.character(x)
  if (is.character(x)) return(np$asarray(reticulate::r_to_py(as.list(x)), dtype = "object"))
  if (is.list(x)) {
    # A list column of equally shaped arrays -> one array with a leading example dimension.
    parts <- lapply(x, function(v) np$asarray(reticulate::r_to_py(as.double(v)), dtype = "float32"))
    dims <- dim(x[[1]]) %||% length(x[[1]])
    stacked <- np$stack(parts)
    return(stacked$reshape(reticulate::tuple(c(list(length(x)), as.list(as.integer(dims))))))
  }
  if (is.integer(x)) return(np$asarray(reticulate::r_to_py(x), dtype = "int64"))
  if (is.numeric(x) || is.logical(x)) {
    arr <- if (is.null(dim(x))) as.double(x) else {
      storage.mode(x) <- "double"
      x
    }
    return(np$asarray(reticulate::r_to_py(arr), dtype = "float32"))
  }
  arg_error(paste0("newdata$", name), x, "a numeric, integer, character, factor or list column")
}

# Python predictions -> data frame. Accepts a dict of arrays or a list of per-example dicts.
predictions_to_df <- function(res) {
  out <- py_to_r_json(res, simplify = TRUE)
  if (is.data.frame(out)) return(tidy_prediction_df(out))
  if (!is.list(out)) return(data.frame(prediction = out))
  class_names <- out$class_names %||% out$vocabulary
  out$class_names <- NULL
  out$vocabulary <- NULL
  n <- NULL
  cols <- list()
  for (name in names(out)) {
    v <- out[[name]]
    if (is.matrix(v)) {
      colnames_v <- if (!is.null(class_names) && ncol(v) == length(class_names) &&
                        grepl("prob|logit|score", name)) {
        paste0(prob_prefix(name), class_names)
      } else {
        paste0(name, "_", seq_len(ncol(v)) - 1L)
      }
      for (j in seq_len(ncol(v))) cols[[colnames_v[[j]]]] <- v[, j]
      n <- nrow(v)
    } else if (is.atomic(v) && is.null(dim(v))) {
      cols[[name]] <- v
      n <- length(v)
    } else if (is.array(v)) {
      flat <- matrix(v, nrow = dim(v)[1])
      for (j in seq_len(ncol(flat))) cols[[paste0(name, "_", j - 1L)]] <- flat[, j]
      n <- nrow(flat)
    }
  }
  df <- as.data.frame(cols, stringsAsFactors = FALSE, optional = TRUE)
  tidy_prediction_df(df, class_names)
}

prob_prefix <- function(name) if (grepl("prob", name)) "prob_" else paste0(name, "_")

tidy_prediction_df <- function(df, class_names = NULL) {
  names(df)[names(df) %in% c("classes", "class_ids", "classid", "predicted_class")] <- "class_id"
  names(df)[names(df) %in% c("class_names", "class_name", "class_string", "label")] <- "class"
  if ("class_id" %in% names(df) && !"class" %in% names(df) && length(class_names)) {
    ids <- as.integer(df$class_id)
    df$class <- class_names[ids + 1L]  # label ids count from 0; R vectors from 1
  }
  front <- intersect(c("class_id", "class"), names(df))
  df[c(front, setdiff(names(df), front))]
}

#' Export a trained model
#'
#' Writes a SavedModel (for TF Serving and [tpu_predict()]) or a TensorFlow Lite
#' file from the latest checkpoint of a run (`tpuestimator.job.export_job()`).
#'
#' @param run A `tpu_run`, a row of [ls_runs()], a run folder or a model folder.
#' @param export_dir Where to write the export.
#' @param format `"saved_model"` or `"tflite"`.
#' @return The path of the export, invisibly.
#' @examples
#' if (tpuestimator_available()) {
#'   withr::with_dir(tempdir(), {
#'     run <- tpu_train(tpu_example("digits"), train.max_steps = 100L, verbose = FALSE)
#'     tpu_export(run, file.path(tempdir(), "digits-lite"), format = "tflite")
#'   })
#' }
#' @export
tpu_export <- function(run, export_dir, format = c("saved_model", "tflite")) {
  format <- match.arg(format)
  target <- run_target(run, "run")
  export_dir <- as_path(export_dir, "export_dir")
  job <- py_mod("job", convert = FALSE)
  res <- with_python(job$export_job(target, export_dir, format = format))
  out <- tryCatch(scalar_or_null(py_to_r_json(res)), error = function(e) NULL)
  invisible(if (is.character(out)) out else export_dir)
}

#' Check a configuration for TPU readiness
#'
#' Runs the Python core's TPU checks (`tpuestimator.check.check_config()`): static
#' shapes, batch sizes dividing by the number of cores, supported ops (compiling
#' the step with XLA on the CPU), input pipeline settings.
#'
#' @param cfg A [tpu_config()] object, a path or a named list.
#' @param ... Configuration overrides, as in [tpu_config()].
#' @return A `tpu_check_report`: a list with the report's fields (the checks with
#'   their status and messages), with a print method.
#' @examples
#' if (tpuestimator_available()) {
#'   tpu_check(tpu_example("digits", dir = tempfile()))
#' }
#' @export
tpu_check <- function(cfg, ...) {
  src <- resolve_config(cfg, overrides_from_dots(...))
  config_mod <- py_mod("config", convert = FALSE)
  jc <- with_python(config_mod$load_config(src$py_source, as.list(src$overrides),
                                           base_dir = src$base_dir))
  check <- py_mod("check", convert = FALSE)
  report <- with_python(check$check_config(jc))
  out <- tryCatch(
    if (reticulate::py_has_attr(report, "to_dict")) py_to_r_json(report$to_dict())
    else py_to_r_json(report),
    error = function(e) list(text = reticulate::py_str(report))
  )
  if (!is.list(out)) out <- list(text = out)
  text <- tryCatch(reticulate::py_str(report), error = function(e) NULL)
  structure(c(out, list(.text = text)), class = "tpu_check_report")
}

#' @export
print.tpu_check_report <- function(x, ...) {
  checks <- x$checks
  if (is.data.frame(checks) && nrow(checks)) {
    cat("<tpu_check_report>\n")
    status <- checks$status %||% checks$level %||% ifelse(isTRUE(checks$ok), "ok", "fail")
    name <- checks$name %||% checks$check %||% seq_len(nrow(checks))
    msg <- checks$message %||% ""
    cat(paste0("  [", format(status), "] ", format(name), "  ", msg), sep = "\n")
    if (!is.null(x$ok)) cat(if (isTRUE(x$ok)) "Ready for TPU.\n" else "Not ready for TPU.\n")
  } else if (!is.null(x$.text)) {
    cat(x$.text, "\n", sep = "")
  } else {
    utils::str(unclass(x))
  }
  invisible(x)
}

#' Write TFRecord files from R data
#'
#' Converts a data frame, arrays, or a folder of images (one sub-folder per class)
#' into sharded TFRecord files plus a `manifest.json` describing the features,
#' ready for a configuration's `data.manifest`
#' (`tpuestimator.data.write_tfrecords()`).
#'
#' Factor labels become ids counted from 0 (the factor's first level is 0) and
#' their levels the vocabulary (class names), so predictions map back to them.
#'
#' @param data A data frame (one column per feature; list columns for arrays), a
#'   named list of arrays with the examples along the first dimension (e.g.
#'   `list(image = x, label = y)`), or the path of a folder of images with one
#'   sub-folder per class.
#' @param out_dir Output folder.
#' @param label Name of the label column or element (default `"label"`), or `NULL`.
#' @param ... Further arguments for the Python writer (e.g. `shards = 4L`,
#'   `eval_fraction = 0.2`, `seed = 1L`); names are passed as they are.
#' @return The Python writer's result: the path of the manifest (or a list of the
#'   files written).
#' @examples
#' if (tpuestimator_available()) {
#'   df <- data.frame(x1 = rnorm(20), x2 = rnorm(20),
#'                    label = factor(sample(c("a", "b"), 20, TRUE)))
#'   tpu_write_tfrecords(df, file.path(tempdir(), "records"))
#' }
#' @export
tpu_write_tfrecords <- function(data, out_dir, label = "label", ...) {
  out_dir <- as_path(out_dir, "out_dir")
  label <- as_nullable_string(label, "label")
  extra <- list(...)
  data_mod <- py_mod("data", convert = FALSE)
  supported <- tryCatch(py_helpers()$signature_params(data_mod$write_tfrecords),
                        error = function(e) character())
  if (is.character(data) && length(data) == 1L) {
    if (!dir.exists(data) && !file.exists(data)) {
      stop("`data` is a path that does not exist: \"", data, "\". Pass a folder of images with one ",
           "sub-folder per class, a data frame or a named list of arrays.", call. = FALSE)
    }
    source <- normalizePath(data)
  } else if (is.data.frame(data) || is.list(data)) {
    if (is.null(names(data)) || any(!nzchar(names(data)))) {
      arg_error("data", data, "a data frame or a named list of arrays")
    }
    np <- reticulate::import("numpy", convert = FALSE)
    vocab <- NULL
    cols <- list()
    for (name in names(data)) {
      x <- data[[name]]
      if (!is.null(label) && identical(name, label) && (is.factor(x) || is.character(x))) {
        f <- if (is.factor(x)) x else factor(x)
        vocab <- levels(f)
        x <- as.integer(f) - 1L  # R factor codes count from 1; label ids from 0
      }
      cols[[name]] <- if (is.null(dim(x)) || is.data.frame(data)) {
        column_to_numpy(x, name, np)
      } else {
        storage.mode(x) <- if (is.integer(x)) "integer" else "double"
        np$asarray(reticulate::r_to_py(x), dtype = if (is.integer(x)) "int64" else "float32")
      }
    }
    source <- reticulate::dict(cols)
    if (!is.null(vocab)) {
      if ("vocabulary" %in% supported || !length(supported)) {
        extra$vocabulary <- extra$vocabulary %||% as.list(vocab)
      }
    }
  } else {
    arg_error("data", data, "a data frame, a named list of arrays or an image folder path")
  }
  if (!is.null(label) && ("label" %in% supported || !length(supported))) extra$label <- label
  res <- with_python(do.call(data_mod$write_tfrecords, c(list(source, out_dir), extra)))
  out <- py_to_r_json(res)
  if (is.character(out) && length(out) == 1L) out else out
}

#' Write a bundled example
#'
#' Copies one of the examples shipped with the Python package (its data and a
#' configuration file) into a folder and returns the configuration's path
#' (`tpuestimator.examples.write_example()`). `"digits"`: 8x8 handwritten digits,
#' ten classes, a small CNN that reaches about 97% accuracy in a minute on a CPU.
#'
#' @param name The example's name, e.g. `"digits"`.
#' @param dir Folder to write into (created). Default: a new temporary folder.
#' @return The path of the example's configuration file.
#' @examples
#' if (tpuestimator_available()) {
#'   path <- tpu_example("digits")
#'   readLines(path)
#' }
#' @export
tpu_example <- function(name = "digits", dir = tempfile("tpu-example-")) {
  name <- as_string(name, "name")
  dir <- as_path(dir, "dir")
  examples <- py_mod("examples", convert = FALSE)
  res <- with_python(examples$write_example(name, dir))
  path <- py_to_r_json(res)
  normalizePath(path)
}
