# Tables from R: a data frame (or a formula with `data =`) straight into a canned model, and
# predictions for a data frame. A thin wrapper over tpuestimator.tables (write_table,
# train_table, predict_table): the feature columns are inferred in Python, the same way as for
# a pandas data frame or a CSV file.

# A data frame -> the pandas data frame tpuestimator.tables reads. Integer columns with NA go as
# doubles (NaN), character and logical columns with NA as lists with None (reticulate would send
# "NA" strings and TRUE there). Dates become days since 1970-01-01 and date-times (POSIXct)
# seconds since 1970-01-01 UTC, numbers a model reads (with a message when `notes`).
r_table_to_py <- function(data, arg = "data", notes = FALSE) {
  if (!is.data.frame(data)) arg_error(arg, data, "a data frame")
  if (!nrow(data)) arg_error(arg, data, "a data frame with at least one row")
  data <- as.data.frame(data, stringsAsFactors = FALSE)
  na_columns <- list()
  for (name in names(data)) {
    x <- data[[name]]
    if (inherits(x, "Date") || inherits(x, "POSIXt")) {
      unit <- if (inherits(x, "Date")) "days" else "seconds"
      x <- data[[name]] <- as.numeric(if (inherits(x, "POSIXlt")) as.POSIXct(x) else x)
      if (notes) message("Column `", name, "` holds dates: the model reads them as ", unit, " since 1970-01-01",
                         if (unit == "seconds") " UTC" else "", " (a number); convert it yourself to choose.")
    }
    if (is.integer(x) && !is.factor(x) && anyNA(x)) data[[name]] <- as.numeric(x)
    if ((is.character(x) || is.logical(x)) && anyNA(x)) {
      na_columns[[name]] <- lapply(x, function(v) if (is.na(v)) NULL else v)
    }
    if (!is.numeric(x) && !is.character(x) && !is.logical(x) && !is.factor(x)) {
      stop("`", arg, "$", name, "` is a column of class ", paste(class(x), collapse = "/"), ", which a model ",
           "cannot read. Convert it to numbers (e.g. as.numeric()), a factor or character; Date and POSIXct ",
           "columns are read as days and seconds since 1970-01-01.", call. = FALSE)
    }
  }
  frame <- reticulate::r_to_py(data)
  if (length(na_columns)) frame <- py_bridge()$table_frame(frame, reticulate::r_to_py(na_columns))
  frame
}

# The data frame and label of tpu_train(formula, data =) or tpu_train(data, label =).
table_from_formula <- function(formula, data) {
  if (is.null(data)) arg_error("data", NULL, "the data frame the formula's columns come from")
  if (!is.data.frame(data)) arg_error("data", data, "a data frame")
  if (length(formula) != 3L) arg_error("formula", formula, "a two-sided formula such as mpg ~ .")
  label <- all.vars(formula[[2L]])
  if (length(label) != 1L) arg_error("formula", formula, "one label column on the left, e.g. mpg ~ .")
  rhs <- all.vars(formula[[3L]])
  missing_cols <- setdiff(c(label, setdiff(rhs, ".")), names(data))
  if (length(missing_cols)) {
    stop("The formula names column(s) not in `data`: ", paste(missing_cols, collapse = ", "),
         ". The columns are: ", paste(names(data), collapse = ", "), ".", call. = FALSE)
  }
  features <- if ("." %in% rhs) setdiff(names(data), label) else rhs
  list(data = data[, c(features, label), drop = FALSE], label = label)
}

train_table_run <- function(table, label, model, feature_columns, missing, split, task, overrides, model_dir,
                            runs_dir, export, verbose, progress, flags = NULL) {
  label <- as_string(label, "label")
  if (!label %in% names(table)) {
    stop("`label` is \"", label, "\", which is not a column of the data frame; the columns are: ",
         paste(names(table), collapse = ", "), ".", call. = FALSE)
  }
  model <- as_string(model %||% "dnn", "model")
  tfruns_dir <- tfruns_active_run_dir()  # defined in tfruns.R; NULL outside tfruns::training_run()
  # Inside training_run(), a folder per run that tfruns does not copy (as run_job's default
  # model dir there), so each run of a tuning_run() trains its own model.
  # One default folder per label and model, so two canned models on one label do not meet.
  default_dir <- if (is.null(tfruns_dir)) file.path("models", paste0("table-", label, "-", model)) else
    file.path(dirname(tfruns_dir), ".models", basename(tfruns_dir))
  out_dir <- model_dir %||% default_dir
  frame <- r_table_to_py(table, notes = verbose)
  if (is.null(task) && verbose) {
    note <- with_python(py_bridge()$table_task_note(frame, label))
    if (!is.null(note)) message(note)
  }
  split <- if (is.data.frame(split)) r_table_to_py(split, "split") else split
  args <- list(frame, label, normalizePath(out_dir, mustWork = FALSE), model = model,
               split = split, overrides = as.list(overrides), export = export)
  # `model_dir =` is the model's folder itself (its table under model_dir/data).
  if (!is.null(model_dir)) args$model_dir <- normalizePath(model_dir, mustWork = FALSE)
  if (!is.null(flags)) args$flags_json <- r_to_json(flags)
  args$run_dir <- tfruns_dir
  if (!is.null(task)) args$task <- as_string(task, "task")
  if (!is.null(feature_columns)) args$feature_columns <- r_to_py_json(feature_columns)
  if (!is.null(missing)) {
    one_policy <- is.character(missing) && length(missing) == 1L && is.null(names(missing))
    args$missing <- if (one_policy) missing else r_to_py_json(as.list(missing))
  }
  if (!is.null(runs_dir)) args$runs_dir <- runs_dir
  args$progress <- py_bridge()$r_callback(reticulate::r_to_py(
    wrap_r_callback(progress_callback(verbose, progress), "progress callback"),
    convert = TRUE
  ))
  result <- with_python(do.call(py_bridge()$train_table, args))
  run <- tpu_run_from_result(result)
  if (!is.null(tfruns_dir)) tfruns_warn_model_dir(run$model_dir, tfruns_dir)
  run$table <- list(label = label, levels = if (is.factor(table[[label]])) levels(table[[label]]) else NULL)
  if (verbose) message("run recorded in ", run$run_dir)
  run
}

# Predictions of a table model for a data frame: class (a factor with the training's levels)
# and prob_<class> columns, or a numeric `prediction`.
predict_table_df <- function(export_dir, newdata, levels = NULL) {
  cols <- py_to_r_json(with_python(py_bridge()$predict_table(export_dir, r_table_to_py(newdata, "newdata"))),
                       simplify = FALSE)
  df <- as.data.frame(lapply(cols, function(v) unlist(lapply(v, function(x) if (is.null(x)) NA else x))),
                      stringsAsFactors = FALSE, optional = TRUE)
  if ("class_id" %in% names(df)) df$class_id <- as.integer(df$class_id)
  if ("class" %in% names(df)) {
    classes <- levels %||% sub("^prob_", "", grep("^prob_", names(df), value = TRUE))
    df$class <- factor(df$class, levels = classes)
  }
  df
}

#' Predict with a trained run
#'
#' `predict()` on the `tpu_run` that [tpu_train()] returns: for a model trained
#' on a data frame (a table), `newdata` is a data frame with the same columns
#' (the label may be left out; an unseen category goes to the out-of-vocabulary
#' bucket) and the result is a data frame with `class` (a factor with the
#' training label's levels) and one `prob_<class>` column per class, or a numeric
#' `prediction` for a regressor. Other runs predict as [tpu_predict()] does.
#'
#' @param object A `tpu_run`.
#' @param newdata A data frame (or what [tpu_predict()] takes).
#' @param ... Unused.
#' @return A data frame, one row per row of `newdata`.
#' @examples
#' if (tpuestimator_available()) {
#'   run <- tpu_train(mpg ~ ., data = mtcars, model = "linear", train.max_steps = 200L,
#'                    model_dir = tempfile("mtcars-"), verbose = FALSE)
#'   head(predict(run, mtcars))
#' }
#' @export
predict.tpu_run <- function(object, newdata, ...) {
  if (missing(newdata) || is.null(newdata)) arg_error("newdata", NULL, "a data frame of the training's columns")
  tpu_predict(object, newdata)
}

#' Declare feature columns
#'
#' A helper for the `feature_columns` argument of [tpu_train()] on a data frame:
#' each named argument is a column (or a new crossed column) and a list of the
#' fields that replace the inferred ones.
#'
#' @param ... Named lists, e.g. `cyl = column_spec("categorical")`,
#'   `cyl_x_gear = column_spec("crossed", columns = c("cyl", "gear"), buckets = 16L)`.
#' @return A named list for `feature_columns`.
#' @examples
#' tpu_feature_columns(cyl = column_spec("categorical"), wt = column_spec(missing = "mean"))
#' @export
tpu_feature_columns <- function(...) {
  cols <- list(...)
  if (length(cols) && (is.null(names(cols)) || any(!nzchar(names(cols))))) {
    arg_error("...", cols, "named column specs, e.g. cyl = column_spec(\"categorical\")")
  }
  cols
}

#' @rdname tpu_feature_columns
#' @param type `"numeric"`, `"bucketized"`, `"categorical"`, `"hashed"`,
#'   `"identity"` or `"crossed"` (NULL keeps the inferred type).
#' @param encoding `"one_hot"` or `"embedding"` (NULL: inferred from the cardinality).
#' @param missing Missing-value policy: `"error"`, `"mean"`, `"zero"` or `"oov"`.
#' @param columns For a crossed column: the columns it crosses.
#' @param buckets Buckets of a hashed, identity or crossed column (or the number of
#'   quantile buckets of a bucketized one).
#' @param embedding_dim Width of an embedding.
#' @param part For `wide_and_deep`: `"wide"`, `"deep"` or `"both"`.
#' @export
column_spec <- function(type = NULL, encoding = NULL, missing = NULL, columns = NULL, buckets = NULL,
                        embedding_dim = NULL, part = NULL) {
  spec <- list(type = type, encoding = encoding, missing = missing,
               columns = if (is.null(columns)) NULL else as.list(as.character(columns)),
               buckets = if (is.null(buckets)) NULL else as.integer(buckets),
               embedding_dim = if (is.null(embedding_dim)) NULL else as.integer(embedding_dim), part = part)
  spec[!vapply(spec, is.null, logical(1))]
}
