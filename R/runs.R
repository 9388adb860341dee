# Run records in tfruns's format, read in R with jsonlite (no Python needed).

default_runs_dir <- function() getOption("tfruns.runs_dir", "runs")

# One reader of run records: the columns' types and order come from the same JSON file as
# Python's `tpuestimator runs ls` (python/tpuestimator/schema/run_columns.json, installed as
# inst/schema/run_columns.json, a link to it), so the two readers agree by construction;
# tests/fixtures/runs/expected_columns.json is checked by both test suites (test-runs-columns.R,
# test_runs_columns.py). Read with jsonlite: the run reader works without Python.
run_columns <- function() {
  cols <- .globals$run_columns
  if (is.null(cols)) {
    path <- system.file("schema", "run_columns.json", package = "tpuestimatorr")
    if (!nzchar(path)) {
      stop("The tpuestimatorr installation lacks schema/run_columns.json: reinstall it.", call. = FALSE)
    }
    cols <- lapply(jsonlite::read_json(path, simplifyVector = TRUE), as.character)
    .globals$run_columns <- cols
  }
  cols
}
run_integer_props <- function() {
  cols <- run_columns()
  c(cols$integer_properties, cols$integer_columns)
}
run_numeric_props <- function() run_columns()$double_properties
run_front_props <- function() run_columns()$front_columns
# tfruns R/ls_runs.R valid_steps_units / get_steps_unit(): the progress column is
# steps_completed when the run has a `steps` property, else epochs_completed when it has
# `epochs`, else steps_completed.
run_progress_column <- function(props) {
  units <- run_columns()$steps_units
  unit <- c(intersect(units, names(props)), units[[1]])[[1]]
  paste0(unit, "_completed")
}
# tfruns R/ls_runs.R run_record(): its loop over the metrics.json keys (`epoch` skipped)
# overwrites the count at each key, so it is the non-null count of the LAST array but `epoch`.
run_completed_rows <- function(metrics) {
  count <- 0L
  for (name in setdiff(names(metrics), "epoch")) {
    values <- unlist(lapply(metrics[[name]], function(v) if (is.null(v)) NA else v))
    count <- sum(!is.na(values))
  }
  as.integer(count)
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
#' `tpuestimator runs ls --json` gives the same columns, names, types and order.
#' Works without Python.
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
#' runs <- tpu_ls_runs(runs_dir = tempfile())   # no runs yet: zero rows
#' nrow(runs)
#' \dontrun{
#' tpu_ls_runs(latest_n = 5)
#' tpu_ls_runs(order = "eval_accuracy", subset = completed)
#' }
#' @export
tpu_ls_runs <- function(runs_dir = default_runs_dir(), latest_n = NULL, order = "start",
                    decreasing = TRUE, subset = NULL) {
  runs_dir <- as_string(runs_dir, "runs_dir")
  latest_n <- as_nullable_integer(latest_n, "latest_n")
  dirs <- list_run_dirs(runs_dir)
  if (!is.null(latest_n)) dirs <- utils::head(dirs, latest_n)
  rows <- lapply(dirs, read_run_row)
  df <- if (length(rows)) do.call(rbind_fill, rows) else data.frame(run_dir = character())
  df <- type_run_columns(df)
  df <- order_run_columns(df)
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

# Child folders of runs_dir holding tfruns.d/, most recent (by name) first.
list_run_dirs <- function(runs_dir) {
  if (!dir.exists(runs_dir)) return(character())
  children <- list.dirs(runs_dir, full.names = TRUE, recursive = FALSE)
  children <- children[dir.exists(file.path(children, "tfruns.d"))]
  children[order(basename(children), decreasing = TRUE)]
}

read_json_file <- function(path, simplify = TRUE) {
  if (!file.exists(path)) return(NULL)
  tryCatch(
    jsonlite::read_json(path, simplifyVector = simplify),
    error = function(e) {
      warning("Skipping unreadable run file ", path, ": ", conditionMessage(e), call. = FALSE)
      NULL
    }
  )
}

read_properties <- function(meta_dir) {
  props_dir <- file.path(meta_dir, "properties")
  if (!dir.exists(props_dir)) return(list())
  files <- list.files(props_dir)
  files <- files[!startsWith(files, ".")]
  props <- lapply(file.path(props_dir, files), function(f) {
    paste(readLines(f, warn = FALSE, encoding = "UTF-8"), collapse = "\n")
  })
  names(props) <- files
  props
}

read_run_row <- function(run_dir) {
  meta_dir <- file.path(run_dir, "tfruns.d")
  row <- list(run_dir = run_dir)

  evaluation <- read_json_file(file.path(meta_dir, "evaluation.json"))
  if (is.list(evaluation) && length(evaluation)) {
    evaluation <- evaluation[vapply(evaluation, function(v) length(v) == 1L, logical(1))]
    evaluation <- lapply(evaluation, function(v) if (is.numeric(v)) as.double(v) else v)
    names(evaluation) <- paste0("eval_", names(evaluation))
    row <- c(row, evaluation)
  }

  metrics_path <- file.path(meta_dir, "metrics.json")
  metrics <- read_json_file(metrics_path)
  if (is.list(metrics)) {
    for (name in setdiff(names(metrics), "epoch")) {  # `epoch` is the x axis: tfruns skips it
      values <- unlist(lapply(metrics[[name]], function(v) if (is.null(v)) NA else v))
      available <- values[!is.na(values)]
      if (length(available)) row[[paste0("metric_", name)]] <- as.double(available[[length(available)]])
    }
    row$metrics <- metrics_path
  }

  flags <- read_json_file(file.path(meta_dir, "flags.json"))
  if (is.list(flags) && length(flags)) {
    flags <- flags[vapply(flags, function(v) is.atomic(v) && length(v) == 1L, logical(1))]
    names(flags) <- paste0("flag_", names(flags))
    row <- c(row, flags)
  }

  props <- read_properties(meta_dir)
  props$run_dir <- NULL
  row <- c(row, props[setdiff(names(props), names(row))])
  if (is.null(row$completed)) row$completed <- "FALSE"
  row$status <- run_status(run_dir)

  error <- read_json_file(file.path(meta_dir, "error.json"), simplify = FALSE)
  if (is.list(error)) {
    row$error_message <- as.character(error$message %||% NA_character_)
    row$error_traceback <- paste(unlist(error$traceback), collapse = "\n")
  }
  source_code <- file.path(meta_dir, "source.tar.gz")
  if (file.exists(source_code)) row$source_code <- source_code

  row[[run_progress_column(props)]] <- run_completed_rows(if (is.list(metrics)) metrics else list())
  row <- row[!vapply(row, is.null, logical(1))]
  as.data.frame(row, stringsAsFactors = FALSE, optional = TRUE)
}

type_run_columns <- function(df) {
  if (!nrow(df)) return(df)
  for (col in names(df)) {
    v <- df[[col]]
    if (col %in% run_columns()$time_properties) {
      df[[col]] <- as.POSIXct(suppressWarnings(as.numeric(v)), origin = "1970-01-01", tz = "UTC")
    } else if (col %in% run_columns()$logical_properties) {
      df[[col]] <- as.logical(toupper(as.character(v)))
    } else if (col %in% run_integer_props()) {
      df[[col]] <- suppressWarnings(as.integer(v))
    } else if (col %in% run_numeric_props() || startsWith(col, "eval_") || startsWith(col, "metric_")) {
      if (is.character(v) || is.integer(v) || (is.logical(v) && all(is.na(v)))) v <- suppressWarnings(as.double(v))
      df[[col]] <- v
    }
  }
  df
}

order_run_columns <- function(df) {
  nms <- names(df)
  eval_cols <- nms[startsWith(nms, "eval_")]
  metric_cols <- nms[startsWith(nms, "metric_")]
  flag_cols <- nms[startsWith(nms, "flag_")]
  front <- intersect(run_front_props(), nms)
  rest <- setdiff(nms, c("run_dir", eval_cols, metric_cols, flag_cols, front, "status"))
  rest <- sort(rest, method = "radix")  # by code point, as Python's sorted()
  df[c(intersect("run_dir", nms), eval_cols, metric_cols, flag_cols, front, intersect("status", nms), rest)]
}

# completed, restarted (a whole-cluster restart continued it in another run), failed
# (error.json), interrupted, or running while its owner process lives on this host: the Python
# core's answer (runs.reading.run_status), whose owner check also refuses a pid reused by a later
# process (system.processes.process_alive), so both readers give a run one status.
run_status <- function(run_dir) {
  as.character(reticulate::py_to_r(with_python(py_bridge()$run_status(normalizePath(run_dir)))))
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
#' [tpu_export()], [tpu_view_run()] and [tpu_tensorboard()]. Works without Python.
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
  meta_dir <- file.path(run_dir, "tfruns.d")
  if (!dir.exists(meta_dir)) {
    stop("`run_dir` is not a run folder (it has no tfruns.d/). Received: run_dir = \"", run_dir,
         "\". See tpu_ls_runs() for the runs recorded here.", call. = FALSE)
  }
  run_dir <- normalizePath(run_dir, winslash = "/")
  props <- read_properties(meta_dir)
  metrics <- read_json_file(file.path(meta_dir, "metrics.json"))
  history <- if (is.list(metrics) && length(metrics)) {
    cols <- lapply(metrics, function(v) unlist(lapply(v, function(e) if (is.null(e)) NA else e)))
    n <- max(lengths(cols))
    as.data.frame(lapply(cols, function(v) c(v, rep(NA, n - length(v)))), optional = TRUE)
  } else {
    data.frame(step = integer())
  }
  config_path <- file.path(run_dir, c("config.yaml", "config.yml", "config.json"))
  config_path <- config_path[file.exists(config_path)]
  config <- if (length(config_path)) {
    tryCatch(
      if (endsWith(config_path[[1]], ".json")) jsonlite::read_json(config_path[[1]])
      else yaml::read_yaml(config_path[[1]]),
      error = function(e) NULL
    )
  }
  resolve <- function(p) {
    if (is.null(p) || !nzchar(p)) return(NULL)
    if (file.exists(p)) return(normalizePath(p, winslash = "/"))
    inside <- file.path(run_dir, p)
    if (file.exists(inside)) return(normalizePath(inside, winslash = "/"))
    p
  }
  export_dir <- resolve(props$export_dir %||% props$export)
  if (is.null(export_dir)) {
    exp <- file.path(run_dir, c("export", "exported_model", "savedmodel"))
    exp <- exp[dir.exists(exp)]
    if (length(exp)) export_dir <- normalizePath(exp[[1]], winslash = "/")
  }
  error <- read_json_file(file.path(meta_dir, "error.json"), simplify = FALSE)
  global_step <- props$global_step %||% props$steps_completed
  new_tpu_run(
    run_dir = run_dir,
    model_dir = resolve(props$model_dir %||% config$run$model_dir),
    export_dir = export_dir,
    metrics = read_json_file(file.path(meta_dir, "evaluation.json"), simplify = FALSE) %||% list(),
    history = history,
    global_step = if (!is.null(global_step)) suppressWarnings(as.integer(global_step)),
    config = config,
    flags = read_json_file(file.path(meta_dir, "flags.json"), simplify = FALSE) %||% list(),
    properties = props,
    completed = if (!is.null(props$completed)) as.logical(toupper(props$completed)) else NA,
    start = parse_time_prop(props$start),
    end = parse_time_prop(props$end),
    error = error
  )
}

parse_time_prop <- function(x) {
  if (is.null(x)) return(NULL)
  as.POSIXct(suppressWarnings(as.numeric(x)), origin = "1970-01-01", tz = "UTC")
}

#' The most recent run
#'
#' The run whose folder name (its start time) sorts last, as tfruns's
#' `latest_run()`.
#'
#' @inheritParams tpu_ls_runs
#' @return A `tpu_run` (see [tpu_run_info()]), or `NULL` when there are no runs.
#' @examples
#' tpu_latest_run(runs_dir = tempfile())   # NULL: no runs there
#' @export
tpu_latest_run <- function(runs_dir = default_runs_dir()) {
  runs_dir <- as_string(runs_dir, "runs_dir")
  dirs <- list_run_dirs(runs_dir)
  if (!length(dirs)) return(NULL)
  tpu_run_info(dirs[[1]])
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
    if (!dir.exists(file.path(run, "tfruns.d"))) {
      stop("`", name, "` is not a run folder (no tfruns.d/ inside). Received: ", name, " = \"", run,
           "\". See tpu_ls_runs().", call. = FALSE)
    }
    return(normalizePath(run, winslash = "/"))
  }
  arg_error(name, run, "a tpu_run, a row of tpu_ls_runs() or a run folder")
}
