# HTML reports of runs: the Python core's (tpuestimator.runs.report, the same pages as
# `tpuestimator runs show --html` / `runs compare --html`), reached through the bridge.

#' View a run report
#'
#' Writes a self-contained HTML report of a run (summary, final evaluation, charts
#' of the recorded metrics, flags, properties, files and any error) and opens it
#' in the browser (or RStudio's viewer). The page is the Python core's
#' (`tpuestimator runs show --html`); tfruns's `view_run()` shows the same run
#' in tfruns's own view.
#'
#' @param run_dir A run: a `tpu_run`, a row of [tpu_ls_runs()], a run folder, or
#'   `NULL` for [tpu_latest_run()].
#' @param viewer A function called with the report's path (default
#'   [utils::browseURL()]), or `NULL` to only write the report. Default: open it in
#'   interactive sessions only.
#' @param output The HTML file to write. Default: a temporary file.
#' @param runs_dir The runs folder searched when `run_dir` is `NULL`.
#' @return The path of the HTML report, invisibly.
#' @seealso [tpu_compare_runs()], [tpu_ls_runs()]
#' @examples
#' \dontrun{
#' tpu_view_run()                          # the latest run
#' tpu_view_run(tpu_ls_runs()[2, ])
#' }
#' @export
tpu_view_run <- function(run_dir = NULL, viewer = default_viewer(), output = NULL,
                     runs_dir = default_runs_dir()) {
  run_dir <- as_run_dir(run_dir, "run_dir", runs_dir)
  run <- tpu_run_info(run_dir)
  output <- output %||% tempfile(paste0("run-", basename(run_dir), "-"), fileext = ".html")
  with_python(py_bridge()$run_report(run$run_dir, normalizePath(output, mustWork = FALSE)))
  open_report(output, viewer)
}

#' Compare two runs
#'
#' Writes an HTML report comparing two runs side by side (final evaluation,
#' metrics charted together, the flags that differ) and opens it.
#'
#' @param runs Two runs: a data frame from [tpu_ls_runs()] with two rows, a character
#'   vector of two run folders, or a list of two `tpu_run`s. Default: the two most
#'   recent runs.
#' @inheritParams tpu_view_run
#' @return The path of the HTML report, invisibly.
#' @examples
#' \dontrun{
#' tpu_compare_runs()
#' tpu_compare_runs(tpu_ls_runs(order = "eval_accuracy")[1:2, ])
#' }
#' @export
tpu_compare_runs <- function(runs = tpu_ls_runs(runs_dir = runs_dir, latest_n = 2), viewer = default_viewer(),
                         output = NULL, runs_dir = default_runs_dir()) {
  dirs <- if (is.data.frame(runs)) {
    runs$run_dir
  } else if (is.character(runs)) {
    runs
  } else if (is.list(runs)) {
    vapply(runs, function(r) as_run_dir(r, "runs"), "")
  } else {
    arg_error("runs", runs, "two runs: a tpu_ls_runs() data frame with two rows or two run folders")
  }
  if (length(dirs) != 2L) {
    held <- if (length(dirs) < 2L) nrow(tpu_ls_runs(runs_dir, order = NULL))
    stop("`runs` must hold exactly two runs to compare. Received ", length(dirs), " run(s)",
         if (length(dirs) < 2L) paste0(" (the runs folder \"", runs_dir, "\" holds ", held,
                                       "); train another run or pass two run folders") else
           "; select two rows, e.g. tpu_ls_runs()[1:2, ]", ".", call. = FALSE)
  }
  dirs <- vapply(dirs, function(d) as_run_dir(d, "runs"), "")
  output <- output %||% tempfile("compare-runs-", fileext = ".html")
  with_python(py_bridge()$compare_report(dirs[[1]], dirs[[2]], normalizePath(output, mustWork = FALSE)))
  open_report(output, viewer)
}

default_viewer <- function() {
  if (!interactive()) return(NULL)
  if (requireNamespace("rstudioapi", quietly = TRUE) && rstudioapi::isAvailable()) {
    return(function(path) rstudioapi::viewer(path))
  }
  utils::browseURL
}

open_report <- function(path, viewer) {
  path <- normalizePath(path, winslash = "/")
  if (!is.null(viewer)) {
    if (!is.function(viewer)) arg_error("viewer", viewer, "NULL or a function(path)")
    viewer(path)
  }
  invisible(path)
}
