# Wrappers of the job-level Python API: evaluate, predict, export, check, data, examples.

# A run (tpu_run, tpu_ls_runs() row, run folder or model folder) -> path for Python: which of
# a run's folders a job reads is the core's answer (tpuestimator.runs.frames.run_target).
run_target <- function(run, name = "run", prefer = c("model_dir", "run_dir", "export_dir")) {
  prefer <- match.arg(prefer)
  if (inherits(run, "tpu_estimator")) {
    return(run$model_dir %||% arg_error(name, "tpu_estimator", "an estimator that has been trained"))
  }
  if (is.data.frame(run)) {
    if (nrow(run) < 1L || is.null(run$run_dir)) arg_error(name, run, "a row of tpu_ls_runs()")
    run <- tpu_run_info(run$run_dir[[1]])
  }
  if (inherits(run, "tpu_run")) {
    fields <- lapply(run[c("model_dir", "run_dir", "export_dir")], function(v) {
      if (is.character(v) && length(v) == 1L && !is.na(v)) v
    })
    target <- reticulate::py_to_r(py_bridge()$run_target(r_to_py_json(fields), prefer))
    return(target %||% arg_error(name, run$run_dir, "a run with a model_dir or run_dir"))
  }
  if (is.character(run) && length(run) == 1L && !is.na(run)) {
    path <- normalizePath(path.expand(run), mustWork = FALSE)
    if (!file.exists(path)) {
      stop("`", name, "` must be a run, a run folder or a model folder. Received: ", name, " = \"",
           run, "\" (no such folder). See tpu_ls_runs() for the runs recorded here.", call. = FALSE)
    }
    target <- reticulate::py_to_r(with_python(py_bridge()$run_target(path, prefer)))
    return(target %||% arg_error(name, run, "a run with a model_dir or run_dir"))
  }
  arg_error(name, run, "a tpu_run (from tpu_train() or tpu_latest_run()), a tpu_ls_runs() row or a folder path")
}

#' Evaluate a trained model or an export
#'
#' Evaluates the latest checkpoint of a run's model on its configured evaluation
#' data, or on other TFRecord files (`tpuestimator.jobs.model_dir_jobs.evaluate_job()`). Given an
#' export (a SavedModel folder written by tpuestimator: `saved_model.pb` and
#' `assets.extra/tpuestimator.json`), evaluates the export offline
#' (`tpuestimator.jobs.export_jobs.evaluate_export()`): accuracy, AUC (binary, or the
#' one-vs-rest macro average), log-loss, the confusion matrix and a per-class
#' table, recorded as a run (with the confusion matrix as a PNG).
#'
#' @param run A `tpu_run` (from [tpu_train()] or [tpu_latest_run()]), a row of
#'   [tpu_ls_runs()], a run folder, a model folder, or an export folder.
#' @param data `NULL` (the configuration's `data.eval`), or a glob of TFRecord files
#'   in the same format as the training data (see [tpu_write_tfrecords()]).
#' @param runs_dir For an export: where the evaluation's run record goes (`NULL`:
#'   `runs`).
#' @param record For an export: write a run record (`TRUE`).
#' @return A named list of metrics (`loss`, `accuracy`, ...). For an export:
#'   `accuracy`, `auc`, `log_loss`, `macro_precision`, `macro_recall`, `macro_f1`,
#'   `num_examples`, `auc_per_class`, `per_class` (a data frame: `class_id`, `class`,
#'   `precision`, `recall`, `f1`, `support`), `confusion_matrix` (a matrix, rows the
#'   true classes, columns the predicted ones) and `run_dir`.
#' @examples
#' if (tpuestimator_available()) {
#'   out <- tempfile("digits-")
#'   run <- tpu_train(tpu_example("digits", dir = file.path(out, "example")),
#'                    train.max_steps = 100L, verbose = FALSE,
#'                    model_dir = file.path(out, "model"), runs_dir = file.path(out, "runs"))
#'   tpu_evaluate(run)
#'   tpu_evaluate(run$export_dir, runs_dir = file.path(out, "runs"))$per_class
#' }
#' @export
tpu_evaluate <- function(run, data = NULL, runs_dir = NULL, record = TRUE) {
  quiet_python_console()  # console.R: no TensorFlow log lines unless asked
  data <- as_nullable_data_pattern(data)
  runs_dir <- as_nullable_path(runs_dir, "runs_dir")
  record <- as_flag(record, "record")
  if (is.character(run) && length(run) == 1L && !is.na(run) && is_export_dir(run)) {
    res <- with_python(py_bridge()$evaluate_export(normalizePath(run), data_pattern = data,
                                                   runs_dir = runs_dir, record = record))
    return(export_evaluation(py_to_r_json(res, simplify = FALSE)))
  }
  target <- run_target(run, "run")
  res <- with_python(py_bridge()$evaluate_job(target, data_pattern = data))
  as.list(py_to_r_json(res))
}

# Whether `path` is an export tpuestimator wrote: the Python core's answer (serving.exports.is_export_dir).
is_export_dir <- function(path) {
  isTRUE(reticulate::py_to_r(py_bridge()$is_export_dir(path.expand(path))))
}

# An export's metadata (serving.export_info.ExportInfo, read by the Python core), as a list; NULL
# for a folder tpuestimator did not export.
export_info <- function(export_dir) {
  py_to_r_json(with_python(py_bridge()$export_info(export_dir)), simplify = FALSE)
}

# The offline evaluation's result (JSON read without simplification) -> metrics list.
export_evaluation <- function(res) {
  num <- function(x) if (is.null(x)) NA_real_ else as.numeric(x)
  names_ <- unlist(res$class_names)
  per_class <- data.frame(
    class_id = vapply(res$per_class, function(r) as.integer(r$class_id), 1L),
    class = vapply(res$per_class, function(r) as.character(r$class), ""),
    precision = vapply(res$per_class, function(r) num(r$precision), 1),
    recall = vapply(res$per_class, function(r) num(r$recall), 1),
    f1 = vapply(res$per_class, function(r) num(r$f1), 1),
    support = vapply(res$per_class, function(r) as.integer(r$support), 1L),
    stringsAsFactors = FALSE
  )
  cm <- matrix(as.integer(unlist(res$confusion_matrix)), nrow = length(names_), byrow = TRUE,
               dimnames = list(true = names_, predicted = names_))
  out <- list(accuracy = num(res$accuracy), auc = num(res$auc), log_loss = num(res$log_loss),
              macro_precision = num(res$macro_precision), macro_recall = num(res$macro_recall),
              macro_f1 = num(res$macro_f1), num_examples = as.integer(res$num_examples),
              auc_per_class = stats::setNames(vapply(res$auc_per_class, num, 1), names_),
              per_class = per_class, confusion_matrix = cm)
  if (!is.null(res$run_dir)) out$run_dir <- res$run_dir
  out
}

as_nullable_data_pattern <- function(data) {
  if (is.null(data)) return(NULL)
  if (!is.character(data) || anyNA(data) || !length(data)) {
    arg_error("data", data, "NULL or a glob of TFRecord files, e.g. \"data/eval-*.tfrecord\"")
  }
  if (length(data) > 1L) data <- paste(normalizePath(data, mustWork = FALSE), collapse = ",")
  data
}

#' Export a trained model
#'
#' Writes a SavedModel (for TF Serving and [tpu_predict()]) or a TensorFlow Lite
#' (LiteRT) file from the latest checkpoint of a run
#' (`tpuestimator.jobs.model_dir_jobs.export_model()`, as `tpuestimator export`).
#'
#' The SavedModel has three signatures: `serving_default` (serialized
#' `tf.Example` records), `image_bytes` (JPEG/PNG bytes, image models) and
#' `features` (decoded tensors). A `.tflite` file is written beside its
#' SavedModel and verified against it on the evaluation records.
#'
#' @param run A `tpu_run`, a row of [tpu_ls_runs()], a run folder or a model folder.
#' @param export_dir Where to write the export.
#' @param format `"saved_model"` or `"tflite"`.
#' @param quantize For `format = "tflite"`: `NULL` or `"none"` (float32),
#'   `"dynamic"` (int8 weights), `"float16"` or `"int8"` (full integer, calibrated
#'   on the training records).
#' @param warmup `NULL` (the config's `export.warmup`) or the number of TF Serving
#'   warmup requests (0 to 1000) to write into `assets.extra/`.
#' @return The path of the export (the `.tflite` file for `format = "tflite"`),
#'   invisibly, with attributes `saved_model` (the SavedModel folder) and, for
#'   TFLite, `tflite` (the verification: `max_abs_diff`, `top1_agreement`,
#'   `examples`, `tflite_bytes`, `saved_model_bytes`, `passed`, ...; a
#'   regressor's `max_rel_diff` and `rms_diff_over_std` instead of
#'   `top1_agreement`).
#' @examples
#' if (tpuestimator_available()) {
#'   out <- tempfile("digits-")
#'   run <- tpu_train(tpu_example("digits", dir = file.path(out, "example")),
#'                    train.max_steps = 100L, verbose = FALSE,
#'                    model_dir = file.path(out, "model"), runs_dir = file.path(out, "runs"))
#'   lite <- tpu_export(run, file.path(out, "lite"), format = "tflite", quantize = "int8")
#'   attr(lite, "tflite")$top1_agreement
#' }
#' @export
tpu_export <- function(run, export_dir, format = c("saved_model", "tflite"), quantize = NULL, warmup = NULL) {
  quiet_python_console()  # console.R: no TensorFlow log lines unless asked
  format <- match.arg(format)
  quantize <- as_nullable_string(quantize)
  modes <- c("none", "dynamic", "float16", "int8")
  if (!is.null(quantize) && !quantize %in% modes) {
    arg_error("quantize", quantize, paste0("NULL or one of \"", paste(modes, collapse = "\", \""), "\""))
  }
  if (!is.null(quantize) && format != "tflite") {
    arg_error("quantize", quantize, "NULL unless format = \"tflite\" (a SavedModel is not quantized)")
  }
  warmup <- as_nullable_integer(warmup)
  if (!is.null(warmup) && (warmup < 0L || warmup > 1000L)) {
    arg_error("warmup", warmup, "NULL or a whole number from 0 to 1000 (TF Serving reads at most 1000 requests)")
  }
  target <- run_target(run, "run")
  export_dir <- as_path(export_dir, "export_dir")
  res <- with_python(py_bridge()$export_model(target, export_dir, format = format, quantize = quantize,
                                              warmup = warmup))
  out <- py_to_r_json(res, simplify = FALSE)
  path <- out$path
  attr(path, "saved_model") <- out$saved_model
  if (!is.null(out$tflite)) attr(path, "tflite") <- out$tflite
  invisible(path)
}

#' Check a configuration for TPU readiness
#'
#' Runs the Python core's TPU checks (`tpuestimator.jobs.check.check_config()`): static
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
  jc <- with_python(py_core()$load_config(src$py_source, as.list(src$overrides), base_dir = src$base_dir))
  bridge <- py_bridge()
  report <- with_python(bridge$check_config(jc))
  out <- tryCatch(py_to_r_json(bridge$check_report_dict(report)),
                  error = function(e) list(text = reticulate::py_str(report)))
  if (!is.list(out)) out <- list(text = out)
  text <- tryCatch(reticulate::py_str(report), error = function(e) NULL)
  structure(c(out, list(.text = text)), class = "tpu_check_report")
}

#' @export
print.tpu_check_report <- function(x, ...) {
  results <- x$results
  if (is.data.frame(results) && nrow(results)) {
    cat("<tpu_check_report> ", if (isTRUE(x$ok)) "ready for TPU" else "NOT ready for TPU", "\n", sep = "")
    mark <- ifelse(results$ok, "ok  ", "FAIL")
    cat(paste0("  [", mark, "] ", results$name, ": ", results$detail), sep = "\n")
  } else if (!is.null(x$.text)) {
    cat(x$.text, "\n", sep = "")
  } else {
    utils::str(unclass(x))
  }
  invisible(x)
}

#' Write TFRecord files from R data
#'
#' Converts a data frame, arrays, a folder of images (one sub-folder per class),
#' or an MNIST-format pair of IDX files (images and labels, gzipped or not)
#' into sharded TFRecord files plus a `manifest.json` describing the features,
#' ready for a configuration's `data.manifest`
#' (`tpuestimator.data.write_tfrecords()`).
#'
#' Factor labels become ids counted from 0 (the factor's first level is 0) and
#' their levels the vocabulary (class names), so predictions map back to them.
#'
#' @param data A data frame (one column per feature; list columns for arrays), a
#'   named list of arrays with the examples along the first dimension (e.g.
#'   `list(image = x, label = y)`), the path of a folder of images with one
#'   sub-folder per class, or the path of an IDX images file such as
#'   `train-images-idx3-ubyte.gz` (written in the MNIST format; its labels file is
#'   the one named like it, `train-labels-idx1-ubyte[.gz]`, or `labels = "FILE"`).
#' @param out_dir Output folder.
#' @param label Name of the label column or element (default `"label"`), or `NULL`.
#' @param ... Further arguments for the Python writer
#'   (`tpuestimator.data.write_tfrecords()`), e.g. `split = 0.2` (the evaluation
#'   fraction), `shards = 4L`, `seed = 1L`, `overwrite = TRUE`, `format = "mnist"`
#'   (with an integer image array in 0..255), `image_size = c(64L, 64L)` for image
#'   folders, `labels = "t10k-labels-idx1-ubyte.gz"` for an IDX images file.
#' @return The manifest, as a list: `path` (the `manifest.json` file, for a
#'   configuration's `data.manifest`), `format`, `features`, `vocabulary`, `splits`
#'   (files and counts per split), ...
#' @examples
#' if (tpuestimator_available()) {
#'   df <- data.frame(x1 = rnorm(20), x2 = rnorm(20),
#'                    label = factor(sample(c("a", "b"), 20, TRUE)))
#'   manifest <- tpu_write_tfrecords(df, tempfile("records-"))
#'   manifest$path
#'   cfg <- tpu_config(list(model = "linear", data = list(manifest = manifest$path)))
#' }
#' @export
tpu_write_tfrecords <- function(data, out_dir, label = "label", ...) {
  out_dir <- as_path(out_dir, "out_dir")
  label <- as_nullable_string(label, "label")
  extra <- list(...)
  if (is.character(data) && length(data) == 1L) {
    if (!dir.exists(data) && !file.exists(data)) {
      stop("`data` is a path that does not exist: \"", data, "\". Pass a folder of images with one ",
           "sub-folder per class, an IDX images file, a data frame or a named list of arrays.", call. = FALSE)
    }
    source <- normalizePath(data)
    if (is.character(extra$labels)) extra$labels <- as_path(extra$labels, "labels")
  } else if (is.data.frame(data) || is.list(data)) {
    if (is.null(names(data)) || any(!nzchar(names(data)))) {
      arg_error("data", data, "a data frame or a named list of arrays")
    }
    vocab <- NULL
    cols <- list()
    for (name in names(data)) {
      x <- data[[name]]
      if (!is.null(label) && identical(name, label) && (is.factor(x) || is.character(x))) {
        f <- if (is.factor(x)) x else factor(x)
        vocab <- levels(f)
        x <- as.integer(f) - 1L  # R factor codes count from 1; label ids from 0
      }
      cols[[name]] <- if (identical(extra$format, "mnist") && !identical(name, label)) {
        r_to_numpy(x + 0, "uint8")
      } else if (is.list(x) || is.character(x) || is.factor(x)) {
        column_to_numpy(x, name)
      } else {
        r_to_numpy(x)
      }
    }
    source <- reticulate::dict(cols)
    if (!is.null(vocab)) extra$vocabulary <- extra$vocabulary %||% as.list(vocab)
  } else {
    arg_error("data", data, "a data frame, a named list of arrays or an image folder path")
  }
  if (!is.null(label)) extra$label <- label
  for (name in intersect(c("shards", "seed"), names(extra))) extra[[name]] <- as_integer(extra[[name]], name)
  if (!is.null(extra$image_size)) extra$image_size <- as.list(as_integer_vector(extra$image_size, "image_size"))
  res <- with_python(do.call(py_bridge()$write_tfrecords, c(list(source, out_dir), extra)))
  py_to_r_json(res, simplify = FALSE)
}

#' Write a bundled example
#'
#' Copies one of the examples shipped with the Python package (its data and a
#' configuration file) into a folder and returns the configuration's path
#' (`tpuestimator.examples.write_example()`). `"digits"`: 8x8 handwritten digits,
#' ten classes, a small CNN that reaches about 97% accuracy in a minute on a CPU.
#' `"shapes"`: generated 32x32 JPEGs of three shapes. `"fashion_mnist"`:
#' Zalando Research's Fashion-MNIST (28x28 grey images of clothing, ten classes;
#' 60,000 training and, as the evaluation split, its 10,000 test images) for the
#' same CNN, read from its four IDX files: those of Debian's package
#' `dataset-fashion-mnist` (`/usr/share/datasets/fashion-mnist`) or a folder
#' given as `from`.
#'
#' @section Reruns:
#' By default the example goes to the same folder every time, in this user's
#' cache of the package (`tools::R_user_dir("tpuestimatorr", "cache")`, under
#' `examples/<name>`), so the configuration's data paths are the same in every
#' R session. That is what lets a script such as
#' `tpu_train(tpu_example("digits"))` run again in a new session: the model
#' dir (`models/digits` in the working directory) was trained on the same data
#' files, so the rerun resumes from its checkpoint (or finds training done)
#' instead of stopping with a `ModelDirConflictError` about changed data paths.
#' A rerun rewrites the example's files with the same bytes. Pass `dir` for a
#' folder of your own; a new folder per call (`dir = tempfile()`) means a new
#' model dir per call too.
#'
#' @param name The example's name, e.g. `"digits"`.
#' @param dir Folder to write into (created). Default: `examples/<name>` in
#'   this user's cache of the package (the same folder in every session).
#' @param from `"fashion_mnist"` only: the folder of its four IDX files
#'   (`train-images-idx3-ubyte.gz`, ..., gzipped or not). Default: the Debian
#'   package's folder.
#' @param limit `"fashion_mnist"` only: keep the first `limit` training images and
#'   the first `limit / 6` test images, for a quick run. Default: all.
#' @return The path of the example's configuration file.
#' @examples
#' if (tpuestimator_available()) {
#'   path <- tpu_example("digits", dir = tempfile())
#'   readLines(path)
#' }
#' @export
tpu_example <- function(name = "digits", dir = example_cache_dir(name), from = NULL, limit = NULL) {
  name <- as_string(name, "name")
  dir <- as_path(dir, "dir")
  from <- as_nullable_path(from, "from")
  limit <- as_nullable_integer(limit, "limit")
  res <- with_python(py_bridge()$write_example(name, dir, source_dir = from, limit = limit))
  path <- py_to_r_json(res)
  normalizePath(path)
}

# The folder tpu_example() writes `name` into by default: the same in every session.
example_cache_dir <- function(name) {
  file.path(tools::R_user_dir("tpuestimatorr", which = "cache"), "examples", name)
}
