# Run records in tfruns's format. The reader is the Python core's (tpuestimator.runs.frames,
# through the bridge's runs.py): R converts its columns and values and prints them (issue 33.4).

# The runs folder: R's option `tfruns.runs_dir` (tfruns's), else the core's default.
default_runs_dir <- function() {
  chosen <- getOption("tfruns.runs_dir")
  chosen <- if (is.character(chosen) && length(chosen) == 1L && !is.na(chosen)) chosen
  as.character(reticulate::py_to_r(py_bridge()$default_runs_dir(chosen)))
}

#' List training runs
#'
#' Reads the run folders under `runs_dir` (tfruns's format: one folder per run,
#' named by its start time, holding `tfruns.d/`) and returns one row per run with
#' tfruns's columns: `run_dir`, `eval_<metric>` (final evaluation),
#' `metric_<name>` (last recorded value of every `metrics.json` array but
#' `epoch`, the x axis, as tfruns), `flag_<name>` (the run's flags), then
#' `samples`, `batch_size`, `epochs` (planned metric rows), `epochs_completed`
#' (rows recorded, counted as tfruns counts them), `metrics` (path of
#' `metrics.json`), `model`, `optimizer`, `learning_rate`, `script`, `start`,
#' `end` (`POSIXct`), `completed`, `output`, `error_message`,
#' `error_traceback`, `source_code`, `context`, `type` (tfruns's order),
#' `status` (`completed`, `failed`, `running` or
#' `interrupted`), and the other recorded properties by name (`global_step`,
#' `max_steps`, `model_dir`, `resumed_from_step`, `strategy`, ...). Python's
#' `tpuestimator runs ls --json` gives the same columns, names, types and order:
#' the Python core reads the runs (without starting TensorFlow) and R converts
#' its columns.
#'
#' @param runs_dir The runs folder. Default: the option `tfruns.runs_dir`, else
#'   `"runs"` (as tfruns).
#' @param latest_n Keep only the `latest_n` most recent runs (by folder name, as
#'   tfruns does).
#' @param order Columns to sort by (default `"start"`).
#' @param decreasing Sort in decreasing order (most recent first).
#' @param subset An optional logical expression on the columns, e.g.
#'   `eval_accuracy > 0.9`.
#' @return A data frame of class `tpu_runs_df`, one row per run (zero rows when
#'   there are none).
#' @seealso [tpu_latest_run()], [tpu_run_info()], [tpu_view_run()], [tpu_compare_runs()]
#' @examples
#' if (tpuestimator_available()) {
#'   runs <- tpu_ls_runs(runs_dir = tempfile())   # no runs yet: zero rows
#'   nrow(runs)
#' }
#' \dontrun{
#' tpu_ls_runs(latest_n = 5)
#' tpu_ls_runs(order = "eval_accuracy", subset = completed)
#' }
#' @export
tpu_ls_runs <- function(runs_dir = default_runs_dir(), latest_n = NULL, order = "start",
                    decreasing = TRUE, subset = NULL) {
  runs_dir <- as_string(runs_dir, "runs_dir")
  latest_n <- as_nullable_integer(latest_n, "latest_n")
  res <- py_to_r_json(with_python(py_bridge()$runs_columns(runs_dir, latest_n = latest_n)), simplify = FALSE)
  relay_warnings(res$warnings)
  df <- runs_df_from_columns(res)
  subset_expr <- substitute(subset)
  if (!is.null(subset_expr) && nrow(df)) {
    keep <- eval(subset_expr, df, parent.frame())
    if (!is.logical(keep)) arg_error("subset", subset_expr, "a logical expression on the run columns")
    df <- df[!is.na(keep) & keep, , drop = FALSE]
  }
  if (length(order) && nrow(df) > 1L) {
    missing_cols <- setdiff(order, names(df))
    if (length(missing_cols)) {
      stop("`order` names columns that tpu_ls_runs() does not have: ", paste(missing_cols, collapse = ", "),
           ". Available: ", paste(names(df), collapse = ", "), ".", call. = FALSE)
    }
    keys <- lapply(order, function(col) {
      v <- df[[col]]
      if (inherits(v, "POSIXct")) as.numeric(v) else v
    })
    df <- df[do.call(base::order, c(keys, list(decreasing = decreasing, na.last = TRUE))), , drop = FALSE]
  }
  rownames(df) <- NULL
  class(df) <- c("tpu_runs_df", "data.frame")
  df
}

# The reader's warnings (a file skipped as unreadable) as R warnings.
relay_warnings <- function(warnings) {
  for (text in unlist(warnings)) warning(text, call. = FALSE)
}

# {types, columns} of the core's listing -> data frame: each column the R vector of its type
# ("character", "integer", "double", "logical", "time": POSIXct from epoch seconds), in its order.
runs_df_from_columns <- function(res) {
  types <- unlist(res$types)
  if (!length(types)) return(data.frame(run_dir = character()))
  cols <- lapply(names(types), function(name) {
    v <- lapply(res$columns[[name]], function(x) if (is.null(x)) NA else x)
    switch(types[[name]],
           time = as.POSIXct(as.numeric(unlist(v)), origin = "1970-01-01", tz = "UTC"),
           logical = as.logical(unlist(v)),
           integer = as.integer(unlist(v)),
           double = as.double(unlist(v)),
           vapply(v, function(x) if (is.na(x)) NA_character_ else as.character(x), ""))
  })
  names(cols) <- names(types)
  as.data.frame(cols, stringsAsFactors = FALSE, optional = TRUE)
}

# The type of each tpu_ls_runs() column, in the vocabulary shared with Python's column_type():
# "character", "integer", "double", "logical" or "time".
run_column_types <- function(df) {
  vapply(df, function(v) {
    if (inherits(v, "POSIXct")) "time"
    else if (is.logical(v)) "logical"
    else if (is.integer(v)) "integer"
    else if (is.double(v)) "double"
    else "character"
  }, character(1))
}

#' @export
print.tpu_runs_df <- function(x, ...) {
  if (!nrow(x)) {
    cat("No runs.\n")
    return(invisible(x))
  }
  cat("<tpu_runs_df>: ", nrow(x), " run", if (nrow(x) != 1L) "s", ", ", ncol(x), " columns\n", sep = "")
  nms <- names(x)
  if (!"run_dir" %in% nms) {  # a selection of columns, e.g. runs[, c("eval_loss", "flag_lr")]
    print(as.data.frame(unclass(x), stringsAsFactors = FALSE), digits = 4, row.names = FALSE)
    return(invisible(x))
  }
  show <- c("run_dir", nms[startsWith(nms, "eval_")], nms[startsWith(nms, "metric_")],
            intersect(c("steps_completed", "start", "completed"), nms))
  out <- as.data.frame(unclass(x)[show], stringsAsFactors = FALSE)
  out$run_dir <- basename(out$run_dir)
  print(out, digits = 4, row.names = FALSE)
  hidden <- setdiff(nms, show)
  if (length(hidden)) {
    cat("# ... and ", length(hidden), " more columns (", paste(utils::head(hidden, 6), collapse = ", "),
        if (length(hidden) > 6) ", ...", "): use as.data.frame() to see them\n", sep = "")
  }
  invisible(x)
}

#' Information about one run
#'
#' Reads a run folder into a `tpu_run` object (the same class [tpu_train()]
#' returns), so it can be passed to [tpu_evaluate()], [tpu_predict()],
#' [tpu_export()], [tpu_view_run()] and [tpu_tensorboard()]. The Python core reads
#' the run (without starting TensorFlow).
#'
#' @param run_dir A run folder (or a `tpu_run`, or a row of [tpu_ls_runs()]).
#' @return A `tpu_run`: `run_dir`, `model_dir`, `export_dir`, `metrics` (the
#'   final evaluation), `history` (`metrics.json` as a data frame), `global_step`,
#'   `config` (when the run holds `config.yaml`), plus `flags`, `properties`,
#'   `completed`, `start`, `end`, `error`.
#' @examples
#' \dontrun{
#' tpu_run_info(tpu_ls_runs()$run_dir[[1]])
#' }
#' @export
tpu_run_info <- function(run_dir) {
  if (inherits(run_dir, "tpu_run")) run_dir <- run_dir$run_dir
  if (is.data.frame(run_dir)) run_dir <- run_dir$run_dir[[1]]
  run_dir <- as_string(run_dir, "run_dir")
  info <- py_to_r_json(with_python(py_bridge()$run_summary(run_dir)), simplify = FALSE)
  if (is.null(info)) {
    stop("`run_dir` is not a run folder (it has no tfruns.d/). Received: run_dir = \"", run_dir,
         "\". See tpu_ls_runs() for the runs recorded here.", call. = FALSE)
  }
  relay_warnings(info$warnings)
  new_tpu_run(
    run_dir = info$run_dir,
    model_dir = info$model_dir,
    export_dir = info$export_dir,
    metrics = info$evaluation %||% list(),
    history = history_df(info$history),
    global_step = if (!is.null(info$global_step)) as.integer(info$global_step),
    config = info$config,
    flags = info$flags %||% list(),
    properties = info$properties,
    completed = if (!is.null(info$completed)) as.logical(info$completed) else NA,
    start = parse_time_prop(info$start),
    end = parse_time_prop(info$end),
    error = info$error
  )
}

# metrics.json's arrays (lists, null -> NA) -> a data frame, the shorter columns padded with NA.
history_df <- function(metrics) {
  if (!length(metrics)) return(data.frame(step = integer()))
  cols <- lapply(metrics, function(v) unlist(lapply(v, function(e) if (is.null(e)) NA else e)))
  n <- max(lengths(cols))
  as.data.frame(lapply(cols, function(v) c(v, rep(NA, n - length(v)))), optional = TRUE)
}

# Epoch seconds -> POSIXct (NULL stays NULL).
parse_time_prop <- function(x) {
  if (is.null(x)) return(NULL)
  as.POSIXct(as.numeric(x), origin = "1970-01-01", tz = "UTC")
}

#' The most recent run
#'
#' The run whose folder name (its start time) sorts last, as tfruns's
#' `latest_run()`.
#'
#' @inheritParams tpu_ls_runs
#' @return A `tpu_run` (see [tpu_run_info()]), or `NULL` when there are no runs.
#' @examples
#' if (tpuestimator_available()) {
#'   tpu_latest_run(runs_dir = tempfile())   # NULL: no runs there
#' }
#' @export
tpu_latest_run <- function(runs_dir = default_runs_dir()) {
  runs_dir <- as_string(runs_dir, "runs_dir")
  latest <- reticulate::py_to_r(with_python(py_bridge()$latest_run_dir(runs_dir)))
  if (is.null(latest)) return(NULL)
  tpu_run_info(latest)
}

# A run argument (tpu_run, tpu_ls_runs() row, path, NULL -> latest) -> run folder.
as_run_dir <- function(run, name = "run", runs_dir = default_runs_dir()) {
  if (is.null(run)) {
    latest <- tpu_latest_run(runs_dir)
    if (is.null(latest)) {
      stop("There are no runs in \"", runs_dir, "\" (", normalizePath(runs_dir, mustWork = FALSE),
           "). Train one with tpu_train(), or pass `", name, "` explicitly.", call. = FALSE)
    }
    return(latest$run_dir)
  }
  if (inherits(run, "tpu_run")) return(run$run_dir)
  if (is.data.frame(run)) {
    if (!nrow(run)) arg_error(name, run, "a row of tpu_ls_runs() (this data frame has no rows)")
    return(run$run_dir[[1]])
  }
  if (is.character(run) && length(run) == 1L) {
    if (!isTRUE(reticulate::py_to_r(py_bridge()$is_run_dir(path.expand(run))))) {
      stop("`", name, "` is not a run folder (no tfruns.d/ inside). Received: ", name, " = \"", run,
           "\". See tpu_ls_runs().", call. = FALSE)
    }
    return(normalizePath(run, winslash = "/"))
  }
  arg_error(name, run, "a tpu_run, a row of tpu_ls_runs() or a run folder")
}
