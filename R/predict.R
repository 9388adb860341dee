# tpu_predict(): predictions from a run or an export for a data frame, an array, files or a table file,
# converted to and from the bridge's plain columns (the reading and the writing are the core's).

#' Predict with a trained or exported model
#'
#' Runs the exported SavedModel (or the latest export of a run) on new data
#' (`tpuestimator.serving.exports.predict()`) and returns one row per example. TFRecord and
#' image files (paths or glob patterns) are read in batches
#' (`tpuestimator.jobs.export_jobs`): with `out`, the predictions go to a CSV or Parquet
#' file batch by batch, so memory stays flat in the number of records. For a model
#' trained on a table, `newdata` may be the path of a `.csv` or `.parquet` table: it
#' is read `chunk_rows` rows at a time (never whole), so with `out` memory stays flat
#' in the table's size, and without it only the predictions are kept; rows in errors
#' are counted from 1 over the whole file.
#'
#' @param run_or_export A `tpu_run`, a row of [tpu_ls_runs()], a run folder, a model
#'   folder or a SavedModel export folder.
#' @param newdata The examples: a data frame (one column per feature), a matrix or
#'   array whose first dimension indexes examples (for a model with a single input,
#'   e.g. images `[n, height, width, channels]` or flattened `[n, height * width]`),
#'   a named list of arrays, or a character vector of TFRecord or JPEG/PNG file
#'   paths or glob patterns (`"data/eval-*.tfrecord"`), or for a table model the
#'   path of one `.csv` or `.parquet` table with the training's columns.
#' @param out `NULL`, or (files only) a `.csv` or `.parquet` file to write the
#'   predictions to (written atomically; Parquet needs the Python package pyarrow).
#' @param batch_size Records per batch when reading files.
#' @param chunk_rows Rows read at a time from a `.csv` or `.parquet` table.
#' @return A data frame with one row per example: `class_id` (the predicted label
#'   id, counted from 0 as in the data), `class` (its name, when the model has a
#'   vocabulary), and one `prob_<class>` column per class (or the model's other
#'   outputs); from files, first `source` (the file) and `index` (the record's index
#'   in it). From a table file: as for a data frame ([predict.tpu_run()]), one row per
#'   row of the file in its order; with `out`, the file holds `source` and `index`
#'   (the row's number in the table, from 0) first, and the path returned has the
#'   attributes `rows` (predictions written) and `chunks` (chunks read). With `out`:
#'   the file's path, invisibly.
#' @examples
#' if (tpuestimator_available()) {
#'   out <- tempfile("digits-")
#'   run <- tpu_train(tpu_example("digits", dir = file.path(out, "example")),
#'                    train.max_steps = 100L, verbose = FALSE,
#'                    model_dir = file.path(out, "model"), runs_dir = file.path(out, "runs"))
#'   images <- array(runif(2 * 8 * 8), dim = c(2, 8, 8, 1))   # [n, height, width, channels]
#'   tpu_predict(run, images)
#'   head(tpu_predict(run, file.path(out, "example", "eval.tfrecord")))
#' }
#' @export
tpu_predict <- function(run_or_export, newdata, out = NULL, batch_size = 1024L, chunk_rows = 65536L) {
  quiet_python_console()  # console.R: no TensorFlow log lines unless asked
  target <- run_target(run_or_export, "run_or_export", prefer = "export_dir")
  if (missing(newdata) || is.null(newdata)) {
    arg_error("newdata", NULL, "a data frame, matrix, array, named list or TFRecord file paths")
  }
  out <- as_nullable_path(out, "out")
  batch_size <- as_integer(batch_size, "batch_size")
  if (batch_size < 1L) arg_error("batch_size", batch_size, "a whole number >= 1")
  chunk_rows <- as_integer(chunk_rows, "chunk_rows")
  if (chunk_rows < 1L) {
    arg_error("chunk_rows", chunk_rows, "a whole number >= 1 (rows read at a time from a table file)")
  }
  target <- find_saved_model(target)
  if (is_table_file(newdata)) {
    levels <- if (inherits(run_or_export, "tpu_run")) run_or_export$table$levels else NULL
    return(predict_table_file(target, newdata, out, batch_size, chunk_rows, levels))
  }
  if (is.character(newdata) && is.null(dim(newdata))) {
    files <- as_file_patterns(newdata)
    if (!is.null(out)) {
      if (!grepl("\\.(csv|parquet)$", out, ignore.case = TRUE)) arg_error("out", out, "a .csv or .parquet file path")
      res <- with_python(py_bridge()$predict_to_file(target, files, out, batch_size = batch_size))
      return(invisible(py_to_r_json(res)$path))
    }
    res <- with_python(py_bridge()$predict_files(target, files, batch_size = batch_size))
    return(prediction_columns_to_df(py_to_r_json(res, simplify = FALSE)))
  }
  if (!is.null(out)) {
    arg_error("out", out, "NULL unless `newdata` names files (TFRecord, images, or a .csv or .parquet table)")
  }
  if (is.data.frame(newdata) && !is.null(py_to_r_json(py_bridge()$table_export(target), simplify = FALSE))) {
    levels <- if (inherits(run_or_export, "tpu_run")) run_or_export$table$levels else NULL
    if (inherits(run_or_export, "tpu_run")) {  # a formula's computed columns (log(x), a:b of numbers)
      newdata <- apply_table_transforms(newdata, run_or_export$table$transforms, run_or_export$table$env)
    }
    return(predict_table_df(target, newdata, levels))  # tables.R
  }
  spec <- export_feature_spec(target)
  features <- as_py_features(newdata, spec)
  res <- with_python(py_bridge()$predict(target, features))
  predictions_to_df(res, export_class_names(target))
}

# One .csv / .parquet path: a table model's input file, read in chunks (predict_table_file).
is_table_file <- function(newdata) {
  is.character(newdata) && is.null(dim(newdata)) && length(newdata) == 1L && !is.na(newdata) &&
    grepl("\\.(csv|parquet|pq)$", newdata, ignore.case = TRUE)
}

# A table model's predictions for a .csv / .parquet file, read `chunk_rows` rows at a time
# (tpuestimator.tables.predict): into `out` chunk by chunk, or as predict_table_df()'s data frame.
predict_table_file <- function(target, path, out, batch_size, chunk_rows, levels = NULL) {
  if (!file.exists(path)) {
    arg_error("newdata", path, "an existing .csv or .parquet file (the table to predict), or a data frame")
  }
  if (is.null(py_to_r_json(py_bridge()$table_export(target), simplify = FALSE))) {
    arg_error("newdata", path, paste0("the files this model reads (TFRecord or images): a .csv or .parquet ",
                                      "table is the input of a model trained on a table only"))
  }
  path <- normalizePath(path)
  if (!is.null(out)) {
    if (!grepl("\\.(csv|parquet)$", out, ignore.case = TRUE)) arg_error("out", out, "a .csv or .parquet file path")
    res <- with_python(py_bridge()$predict_table_file_to_file(target, path, out, chunk_rows = chunk_rows,
                                                              batch_size = batch_size))
    res <- py_to_r_json(res)
    return(invisible(structure(res$path, rows = as.integer(res$rows), chunks = as.integer(res$chunks))))
  }
  cols <- py_to_r_json(with_python(py_bridge()$predict_table_file(target, path, chunk_rows = chunk_rows,
                                                                  batch_size = batch_size)), simplify = FALSE)
  table_prediction_columns_to_df(cols, levels)
}

# {column: list} of a table model's predictions -> a data frame: `class` a factor with the
# training label's levels (else the prob_<class> columns' order), `class_id` integer.
table_prediction_columns_to_df <- function(cols, levels = NULL) {
  df <- prediction_columns_to_df(cols)
  if ("class" %in% names(df)) {
    classes <- levels %||% sub("^prob_", "", grep("^prob_", names(df), value = TRUE))
    df$class <- factor(df$class, levels = classes)
  }
  df
}

# File paths / glob patterns -> a Python list; a plain path (no wildcard) must exist.
as_file_patterns <- function(newdata) {
  if (!length(newdata) || anyNA(newdata)) arg_error("newdata", newdata, "file paths or glob patterns")
  glob <- grepl("[*?[]", newdata)
  missing_files <- newdata[!glob & !file.exists(newdata)]
  if (length(missing_files)) {
    stop("`newdata` holds file paths that do not exist: ", paste(missing_files, collapse = ", "),
         ". Pass TFRecord (or JPEG/PNG) files, or a data frame/matrix/array of features.", call. = FALSE)
  }
  paths <- ifelse(glob, path.expand(newdata), normalizePath(newdata, mustWork = FALSE))
  reticulate::r_to_py(as.list(paths))
}

# {column: list} from tpuestimator.jobs.export_jobs.predict_columns -> data frame (columns kept in order).
prediction_columns_to_df <- function(cols) {
  df <- as.data.frame(lapply(cols, function(v) {
    unlist(lapply(v, function(x) if (is.null(x)) NA else x)) %||% logical()
  }), stringsAsFactors = FALSE, optional = TRUE)
  for (k in intersect(c("index", "class_id"), names(df))) df[[k]] <- as.integer(df[[k]])
  if ("class" %in% names(df)) df$class <- as.character(df$class)
  df
}

# R data -> what tpuestimator.serving.exports.predict() takes as `features`.
as_py_features <- function(newdata, spec = NULL) {
  if (is.character(newdata) && is.null(dim(newdata))) {
    missing_files <- newdata[!file.exists(newdata)]
    if (length(missing_files)) {
      stop("`newdata` holds file paths that do not exist: ", paste(missing_files, collapse = ", "),
           ". Pass TFRecord (or JPEG/PNG) files, or a data frame/matrix/array of features.", call. = FALSE)
    }
    return(reticulate::r_to_py(as.list(normalizePath(newdata))))
  }
  if (is.list(newdata)) {
    if (is.null(names(newdata)) || any(!nzchar(names(newdata)))) {
      arg_error("newdata", newdata, "a data frame or a named list of feature arrays")
    }
    cols <- lapply(names(newdata), function(n) {
      x <- newdata[[n]]
      arr <- column_to_numpy(x, n)
      if (!is.null(spec[[n]]) && !is.character(x) && !is.factor(x)) {
        arr <- fit_feature_shape(arr, example_dims(x), spec[[n]]$shape, paste0("newdata$", n), n)
      }
      arr
    })
    names(cols) <- names(newdata)
    if (length(spec)) {
      absent <- setdiff(names(spec), names(cols))
      if (length(absent)) {
        stop("`newdata` lacks the feature(s) ", paste0("`", absent, "`", collapse = ", "), " that the model takes ",
             "(it takes ", paste0("`", names(spec), "`", collapse = ", "), ").", call. = FALSE)
      }
    }
    return(reticulate::dict(cols))
  }
  if (is.numeric(newdata) || is.logical(newdata)) {
    if (is.null(dim(newdata))) newdata <- matrix(newdata, nrow = 1L)
    arr <- r_to_numpy(newdata + 0, "float32")
    if (length(spec) == 1L) {
      arr <- fit_feature_shape(arr, dim(newdata)[-1], spec[[1]]$shape, "newdata", names(spec))
    } else if (length(spec) > 1L) {
      arg_error("newdata", newdata, paste0("a data frame or named list: the model takes several features (",
                                           paste(names(spec), collapse = ", "), ")"))
    }
    return(arr)
  }
  arg_error("newdata", newdata, "a data frame, matrix, array, named list or TFRecord file paths")
}

# Per-example dimensions of an R feature column (examples along the first dimension).
example_dims <- function(x) {
  if (is.list(x)) return(dim(x[[1]]) %||% length(x[[1]]))
  d <- dim(x)
  if (is.null(d)) integer() else d[-1]
}

# Reshapes (numpy, row-major like numpy's reshape) examples whose size matches the model's
# feature shape; refuses sizes that do not match (TensorFlow would abort the process).
fit_feature_shape <- function(arr, dims, shape, what, feature) {
  shape <- as.integer(unlist(shape))
  dims <- as.integer(dims)
  if (!length(shape)) shape <- integer()
  if (identical(dims, shape) || (prod(dims) == 1L && prod(shape) == 1L && length(shape) <= 1L)) {
    if (!identical(dims, shape)) {
      arr <- arr$reshape(reticulate::tuple(c(list(-1L), as.list(shape))))
    }
    return(arr)
  }
  if (prod(dims) == prod(shape)) {
    return(arr$reshape(reticulate::tuple(c(list(-1L), as.list(shape)))))
  }
  stop("`", what, "` has examples of shape [", paste(dims, collapse = ", "), "] (", prod(dims),
       " values) but the model's feature `", feature, "` has shape [", paste(shape, collapse = ", "), "] (",
       prod(shape), " values). Pass one example per row (or along the first dimension) with ",
       prod(shape), " values.", call. = FALSE)
}

export_feature_spec <- function(export_dir) {
  spec <- export_info(export_dir)$feature_spec
  if (!is.list(spec) || !length(spec)) return(NULL)
  lapply(spec, function(s) list(shape = unlist(s[[1]]), dtype = s[[2]]))
}

column_to_numpy <- function(x, name) {
  if (is.factor(x) || is.character(x)) return(r_to_numpy(as.character(x)))
  if (is.list(x)) {
    # A list column of equally shaped arrays -> one array with a leading example dimension.
    dims <- dim(x[[1]]) %||% length(x[[1]])
    if (any(vapply(x, length, 1L) != prod(dims))) {
      arg_error(paste0("newdata$", name), x, "a list column of equally sized numeric vectors or arrays")
    }
    flat <- matrix(unlist(lapply(x, as.double)), nrow = length(x), byrow = TRUE)
    # Row i holds example i in R's column-major order; rebuild [n, dims...].
    arr <- array(NA_real_, dim = c(length(x), dims))
    for (i in seq_along(x)) arr[i + (seq_len(prod(dims)) - 1L) * length(x)] <- flat[i, ]
    return(r_to_numpy(arr, "float32"))
  }
  if (is.integer(x)) return(r_to_numpy(x, "int64"))
  if (is.numeric(x) || is.logical(x)) return(r_to_numpy(x + 0, "float32"))
  arg_error(paste0("newdata$", name), x, "a numeric, integer, character, factor or list column")
}

# Python predictions (a list of per-example dicts) -> data frame: the columns, their names
# (class_id, class, prob_<class>, ...) and order are the core's
# (tpuestimator.serving.prediction_files.example_prediction_columns).
predictions_to_df <- function(res, class_names = NULL) {
  cols <- py_bridge()$example_prediction_columns(res, as.list(class_names))
  prediction_columns_to_df(py_to_r_json(cols, simplify = FALSE))
}

# A SavedModel folder from a run/model/export folder: the Python core's answer
# (serving.exports.resolve_export_dir, as the command line's), so R and Python mean the same export.
find_saved_model <- function(path) {
  as.character(reticulate::py_to_r(with_python(py_bridge()$resolve_export_dir(path))))
}

export_class_names <- function(export_dir) {
  names <- unlist(export_info(export_dir)$class_names)
  if (is.character(names) && length(names)) names else NULL
}
