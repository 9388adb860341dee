#' Run TensorBoard on runs
#'
#' Starts TensorBoard with the Python core's launcher
#' (`tpuestimator.runs.tensorboard.start_tensorboard()`, as `tpuestimator tensorboard`
#' does: `python -m tensorboard.main` of the same Python, on 127.0.0.1 and a free
#' port, in its own process group), waits until it answers and opens it in the
#' browser. One server per R session: a new call stops the previous server
#' first. `action = "stop"` stops it (TensorBoard and any child it started).
#'
#' @param run_or_dir What to show: a `tpu_run`, a row (or rows) of [tpu_ls_runs()], a
#'   run folder, a runs folder (all its runs), or a folder of TensorBoard event
#'   files. Default: the runs folder.
#' @param action `"start"` or `"stop"`.
#' @param port A port number, or `"auto"` for a free one.
#' @param launch_browser Open the page in the browser (default: in interactive
#'   sessions).
#' @param reload_interval Seconds between TensorBoard's reloads of the event files.
#' @param timeout Seconds to wait for TensorBoard to answer (the option
#'   `tpuestimatorr.tensorboard_timeout`, else 60).
#' @return For `"start"`, the URL, invisibly (the server's process id is in
#'   `attr(, "pid")`); for `"stop"`, `TRUE` when a server was stopped,
#'   invisibly.
#' @examples
#' \dontrun{
#' tpu_tensorboard()                       # every run under runs/
#' tpu_tensorboard(tpu_latest_run())
#' tpu_tensorboard(action = "stop")
#' }
#' @export
tpu_tensorboard <- function(run_or_dir = default_runs_dir(), action = c("start", "stop"), port = "auto",
                            launch_browser = interactive(), reload_interval = 5,
                            timeout = getOption("tpuestimatorr.tensorboard_timeout", 60)) {
  action <- match.arg(action)
  if (action == "stop") return(invisible(tensorboard_stop()))
  launch_browser <- as_flag(launch_browser, "launch_browser")
  dirs <- tensorboard_dirs(run_or_dir)
  if (!identical(port, "auto")) port <- as_integer(port, "port")
  tensorboard_stop()
  logdir <- if (length(dirs) == 1L) dirs else stats::setNames(as.list(dirs), basename(dirs))
  server <- with_python(py_bridge()$start_tensorboard(
    if (is.list(logdir)) reticulate::dict(logdir) else logdir, port = port, timeout = as.numeric(timeout),
    reload_interval = as.numeric(reload_interval)))
  url <- reticulate::py_to_r(server$url)
  pid <- reticulate::py_to_r(server$pid)
  .globals$tensorboard <- server
  message("TensorBoard at ", url, " (stop it with tpu_tensorboard(action = \"stop\"))")
  if (launch_browser) utils::browseURL(url)
  invisible(structure(url, pid = pid))
}

tensorboard_stop <- function() {
  server <- .globals$tensorboard
  .globals$tensorboard <- NULL
  if (is.null(server)) return(FALSE)
  try(server$stop(), silent = TRUE)
  TRUE
}

# The folders to show: run folders (or a runs folder, or event-file folders), which must exist.
tensorboard_dirs <- function(run_or_dir) {
  if (inherits(run_or_dir, "tpu_run")) run_or_dir <- run_or_dir$run_dir
  if (is.data.frame(run_or_dir)) run_or_dir <- run_or_dir$run_dir
  if (is.list(run_or_dir)) run_or_dir <- vapply(run_or_dir, as_run_dir, "")
  if (!is.character(run_or_dir) || !length(run_or_dir) || anyNA(run_or_dir)) {
    arg_error("run_or_dir", run_or_dir, "a run, rows of tpu_ls_runs(), a run folder or a runs folder")
  }
  missing_dirs <- run_or_dir[!dir.exists(run_or_dir)]
  if (length(missing_dirs)) {
    stop("`run_or_dir` names folders that do not exist: ", paste0("\"", missing_dirs, "\"", collapse = ", "),
         ". Train a run first (tpu_train()) or pass an existing folder.", call. = FALSE)
  }
  normalizePath(run_or_dir, winslash = "/")
}
