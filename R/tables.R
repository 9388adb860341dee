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
  # reticulate sends a length-1 column as a Python scalar (pandas refuses a factor's, other types
  # lose their dtype): a one-row frame goes as two copies of its row, cut back to one in Python,
  # so it reaches the model exactly as the same row of a larger frame would.
  rows <- nrow(data)
  if (rows == 1L) data <- data[c(1L, 1L), , drop = FALSE]
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
  if (length(na_columns) || rows == 1L) {
    frame <- py_bridge()$table_frame(frame, if (length(na_columns)) reticulate::r_to_py(na_columns), rows = rows)
  }
  frame
}

# The data frame, label, extra feature columns and transformed columns of tpu_train(formula,
# data =) or tpu_tuning_run(formula, data =), read as stats::terms() reads the formula: `.` is
# every other column, `-` drops terms, a function of a column (log(x), I(x^2)) becomes a column
# computed here, `a:b` a crossed column (categories) or the product (numbers, as lm's model
# matrix). `transforms` (name, expression) are what predict() on the run computes again.
table_from_formula <- function(formula, data) {
  if (is.null(data)) arg_error("data", NULL, "the data frame the formula's columns come from")
  if (!is.data.frame(data)) arg_error("data", data, "a data frame")
  if (length(formula) != 3L) arg_error("formula", formula, "a two-sided formula such as mpg ~ .")
  lhs <- formula[[2L]]
  if (!is.name(lhs)) {
    if (length(all.vars(lhs)) != 1L) arg_error("formula", formula, "one label column on the left, e.g. mpg ~ .")
    stop("The formula's left side is `", deparse1(lhs), "`, a function of a column: a canned model learns the ",
         "label column itself (its predictions would be on the transformed scale). Add the column first, ",
         "e.g. data$", formula_column_name(deparse1(lhs)), " <- with(data, ", deparse1(lhs), "), and put it ",
         "on the left.",
         call. = FALSE)
  }
  label <- as.character(lhs)
  missing_cols <- setdiff(c(label, setdiff(all.vars(formula[[3L]]), ".")), names(data))
  if (length(missing_cols)) {
    stop("The formula names column(s) not in `data`: ", paste(missing_cols, collapse = ", "),
         ". The columns are: ", paste(names(data), collapse = ", "), ".", call. = FALSE)
  }
  tt <- stats::terms(formula, data = data)
  if (!is.null(attr(tt, "offset"))) {
    stop("The formula has an offset(): a canned model has no fixed offset term. Drop it, or add the column ",
         "as an input.", call. = FALSE)
  }
  term_labels <- attr(tt, "term.labels")
  if (!length(term_labels)) arg_error("formula", formula, "at least one input column on the right, e.g. mpg ~ .")
  factors <- attr(tt, "factors")
  env <- environment(formula) %||% globalenv()
  values <- list()       # variable (as terms() writes it) -> list(name, value, expr)
  variable <- function(v) {
    if (!is.null(values[[v]])) return(values[[v]])
    expr <- str2lang(v)
    out <- if (is.name(expr) && as.character(expr) %in% names(data)) {  # `my col` comes back quoted
      list(name = as.character(expr), value = data[[as.character(expr)]], expr = NULL)
    } else {
      value <- eval_term(expr, data, env)
      if (!is.null(dim(value)) || length(value) != nrow(data) || !(is.numeric(value) || is.factor(value) ||
                                                                     is.character(value) || is.logical(value))) {
        stop("The formula's term `", v, "` gives ", if (!is.null(dim(value))) "a matrix" else
          paste0(length(value), " value(s) of class ", class(value)[[1]]), " for the ", nrow(data),
          " rows: a canned model takes one number, category or logical per row and input. Compute the ",
          "column(s) you mean in `data` first.", call. = FALSE)
      }
      list(name = formula_column_name(v), value = value, expr = expr)
    }
    values[[v]] <<- out
    out
  }
  categorical <- function(x) is.factor(x) || is.character(x) || is.logical(x)
  features <- character()
  feature_columns <- list()
  transforms <- list()
  add_transform <- function(name, expr, what) {
    if (name %in% c(names(data), label) && !identical(expr, str2lang(name))) {
      stop("The formula's term `", what, "` would be computed as the column `", name, "`, which `data` ",
           "already has. Rename that column or compute the term in `data` yourself.", call. = FALSE)
    }
    transforms[[name]] <<- list(name = name, expr = expr, what = what)
  }
  for (term in term_labels) {
    vars <- rownames(factors)[factors[, term] > 0]
    parts <- lapply(vars, variable)
    if (length(parts) == 1L) {
      if (!is.null(parts[[1]]$expr)) add_transform(parts[[1]]$name, parts[[1]]$expr, term)
      features <- c(features, parts[[1]]$name)
      next
    }
    for (p in parts) if (!is.null(p$expr)) add_transform(p$name, p$expr, deparse1(p$expr))
    kinds <- vapply(parts, function(p) if (categorical(p$value)) "category" else "number", "")
    name <- paste(vapply(parts, `[[`, "", "name"), collapse = "_x_")
    if (all(kinds == "number")) {
      # lm's model matrix: the product of the numbers
      product <- Reduce(function(a, b) call("*", a, b), lapply(parts, function(p) p$expr %||% as.name(p$name)))
      add_transform(name, product, term)
      features <- c(features, name)
    } else if (all(kinds == "category")) {
      levels <- vapply(parts, function(p) length(unique(p$value[!is.na(p$value)])), numeric(1))
      features <- c(features, vapply(parts, `[[`, "", "name"))  # the crossed column's sources
      feature_columns[[name]] <- column_spec("crossed", columns = vapply(parts, `[[`, "", "name"),
                                             buckets = max(2L, min(prod(levels + 1), 10000L)))
    } else {
      stop("The formula's term `", term, "` crosses a category with a number (",
           paste0(vars, " (", kinds, ")", collapse = ", "), "): a canned model crosses categories only. ",
           "Make the number a category first (e.g. factor() or cut() in `data`), or leave the term out.",
           call. = FALSE)
    }
  }
  features <- unique(features)
  table <- data[, intersect(features, names(data)), drop = FALSE]
  for (t in transforms) table[[t$name]] <- eval_term(t$expr, data, env)
  table <- table[, features, drop = FALSE]
  table[[label]] <- data[[label]]
  for (t in transforms) {
    message("Formula: `", t$what, "` is computed in R as the column `", t$name, "`; the export (tpu_predict() ",
            "on its folder, serving) then expects `", t$name, "` to hold that value, and predict() on the run ",
            "computes it from the columns.")
  }
  list(data = table, label = label, feature_columns = if (length(feature_columns)) feature_columns,
       transforms = unname(lapply(transforms, function(t) list(name = t$name, expr = t$expr))), env = env)
}

# A formula term's values for the rows of `data` (I()'s AsIs class dropped: a plain vector).
eval_term <- function(expr, data, env) {
  value <- eval(expr, data, env)
  if (inherits(value, "AsIs")) class(value) <- setdiff(class(value), "AsIs")
  value
}

# A formula term as a column name the tables take: letters, digits and _ (log(hp) -> log_hp).
formula_column_name <- function(term) {
  name <- gsub("^_+|_+$", "", gsub("[^A-Za-z0-9]+", "_", term))
  if (!nzchar(name)) name <- "term"
  if (grepl("^[0-9]", name)) name <- paste0("x_", name)
  name
}

# The transformed columns of a formula's run computed for `newdata` (predict()).
apply_table_transforms <- function(newdata, transforms, env = globalenv()) {
  if (!length(transforms) || !is.data.frame(newdata)) return(newdata)
  for (t in transforms) {
    value <- tryCatch(eval_term(t$expr, newdata, env %||% globalenv()), error = function(e) {
      stop("`newdata` cannot give the column `", t$name, "` (", deparse1(t$expr), ") of the training's ",
           "formula: ", conditionMessage(e), call. = FALSE)
    })
    newdata[[t$name]] <- value
  }
  newdata
}

train_table_run <- function(table, label, model, feature_columns, missing, split, task, overrides, model_dir,
                            runs_dir, export, verbose, progress, flags = NULL, transforms = NULL,
                            transforms_env = NULL, early_stopping = TRUE) {
  label <- as_string(label, "label")
  if (!label %in% names(table)) {
    stop("`label` is \"", label, "\", which is not a column of the data frame; the columns are: ",
         paste(names(table), collapse = ", "), ".", call. = FALSE)
  }
  model <- as_string(model %||% "dnn", "model")
  early_stopping <- table_early_stopping_arg(early_stopping)
  tfruns_dir <- tfruns_active_run_dir()  # defined in tfruns.R; NULL outside tfruns::training_run()
  # the Python core's rule (tables.api.default_table_dir): models/table-<label>-<model>, or inside
  # training_run() a folder per run that tfruns does not copy
  out_dir <- model_dir %||%
    as.character(reticulate::py_to_r(py_bridge()$default_table_dir(label, model, tfruns_dir)))
  quiet_python_console()  # console.R: no TensorFlow log lines unless asked
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
  args$early_stopping <- early_stopping
  args$run_dir <- tfruns_dir
  if (!is.null(task)) args$task <- as_string(task, "task")
  if (!is.null(feature_columns)) args$feature_columns <- r_to_py_json(feature_columns)
  if (!is.null(missing)) args$missing <- table_missing_arg(missing)
  # like every run: runs/ of the working folder (or the option tfruns.runs_dir), where
  # tpu_ls_runs() and tfruns::ls_runs() look (inside training_run(), tfruns's run folder)
  args$runs_dir <- normalizePath(runs_dir %||% default_runs_dir(), mustWork = FALSE)
  args$progress <- py_bridge()$r_callback(reticulate::r_to_py(
    wrap_r_callback(progress_callback(verbose, progress), "progress callback"),
    convert = TRUE
  ))
  result <- with_python(do.call(py_bridge()$train_table, args))
  run <- tpu_run_from_result(result)
  if (!is.null(tfruns_dir)) tfruns_warn_model_dir(run$model_dir, tfruns_dir)
  run$stopped_early <- isTRUE(reticulate::py_to_r(result$stopped_early))
  run$best_step <- scalar_or_null(reticulate::py_to_r(result$best_step))
  if (verbose) {
    note <- early_stopping_note(run)
    if (!is.null(note)) message(note)
  }
  run$table <- list(label = label, levels = if (is.factor(table[[label]])) levels(table[[label]]) else NULL,
                    transforms = transforms, env = transforms_env)
  if (verbose) message("run recorded in ", run$run_dir)
  run
}

# `early_stopping` of tpu_train() on a table: TRUE, FALSE or a named list of the rule's fields
# (as JSON, so 10 and 10L both arrive as the integer the config's schema wants).
table_early_stopping_arg <- function(early_stopping) {
  if (isTRUE(early_stopping) || isFALSE(early_stopping)) return(early_stopping)
  fields <- c("metric", "mode", "patience", "min_delta", "restore_best")
  if (is.list(early_stopping) && length(early_stopping) && !is.null(names(early_stopping)) &&
      all(names(early_stopping) %in% fields)) {
    return(r_to_py_json(early_stopping))
  }
  arg_error("early_stopping", early_stopping, paste0(
    "TRUE (stop on the held-out loss, patience 5), FALSE (train every step) or a named list of ",
    paste(fields, collapse = ", "), ", such as list(patience = 10L)"))
}

# The line saying where a table's training stopped and which evaluation's model it kept; NULL
# when it trained every step and kept the last.
early_stopping_note <- function(run) {
  rule <- run$config$eval$early_stopping
  best <- run$best_step
  if (is.null(rule) || is.null(best) || (!run$stopped_early && isTRUE(best == run$global_step))) return(NULL)
  kept <- paste0("the held-out ", rule$metric, " was best at step ", best, ", whose model is evaluated and exported")
  if (!run$stopped_early) return(paste0("Trained to step ", run$global_step, "; ", kept, "."))
  paste0("Training stopped early at step ", run$global_step, " of ", run$config$train$max_steps, ": ", kept,
         " (early_stopping = FALSE trains every step).")
}

# `missing` of tpu_train()/tpu_tuning_run() on a table: one policy, or a named list of them.
table_missing_arg <- function(missing) {
  one_policy <- is.character(missing) && length(missing) == 1L && is.null(names(missing))
  if (one_policy) missing else r_to_py_json(as.list(missing))
}

# Predictions of a table model for a data frame: class (a factor with the training's levels)
# and prob_<class> columns, or a numeric `prediction`.
predict_table_df <- function(export_dir, newdata, levels = NULL) {
  cols <- py_to_r_json(with_python(py_bridge()$predict_table(export_dir, r_table_to_py(newdata, "newdata"))),
                       simplify = FALSE)
  table_prediction_columns_to_df(cols, levels)  # jobs.R: the same columns as a table file's predictions
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
