#' Run TensorBoard on runs
#'
#' Starts TensorBoard (`python -m tensorboard.main --logdir ... --host 127.0.0.1
#' --port P`, with the same Python that tpuestimatorr uses) in the background,
#' waits until it answers and opens it in the browser. One server per R session: a
#' new call stops the previous server first. `action = "stop"` stops it.
#'
#' @param run_or_dir What to show: a `tpu_run`, a row (or rows) of [tpu_ls_runs()], a
#'   run folder, a runs folder (all its runs), or a folder of TensorBoard event
#'   files. Default: the runs folder.
#' @param action `"start"` or `"stop"`.
#' @param port A port number, or `"auto"` for a free one (from 6006 up).
#' @param launch_browser Open the page in the browser (default: in interactive
#'   sessions).
#' @param reload_interval Seconds between TensorBoard's reloads of the event files.
#' @param timeout Seconds to wait for TensorBoard to answer.
#' @return For `"start"`, the URL, invisibly (the process is in
#'   `attr(, "process")`); for `"stop"`, `TRUE` when a server was stopped,
#'   invisibly.
#' @examples
#' \dontrun{
#' tpu_tensorboard()                       # every run under runs/
#' tpu_tensorboard(tpu_latest_run())
#' tpu_tensorboard(action = "stop")
#' }
#' @export
tpu_tensorboard <- function(run_or_dir = default_runs_dir(), action = c("start", "stop"), port = "auto",
                        launch_browser = interactive(), reload_interval = 5, timeout = 60) {
  action <- match.arg(action)
  if (action == "stop") return(invisible(tensorboard_stop()))
  launch_browser <- as_flag(launch_browser, "launch_browser")
  tensorboard_stop()

  logdir_args <- tensorboard_logdir_args(run_or_dir)
  port <- if (identical(port, "auto")) free_port() else as_integer(port, "port")
  python <- tpuestimator_python()
  if (is.null(python) || !file.exists(python)) {
    stop("No Python found to run TensorBoard. Run install_tpuestimator() or set TPUESTIMATORR_PYTHON.",
         call. = FALSE)
  }
  args <- c("-m", "tensorboard.main", logdir_args, "--host", "127.0.0.1", "--port", as.character(port),
            "--reload_interval", as.character(reload_interval), "--load_fast", "false")
  log_file <- tempfile("tensorboard-", fileext = ".log")
  process <- processx::process$new(python, args, stdout = log_file, stderr = "2>&1",
                                   cleanup = TRUE, cleanup_tree = TRUE)
  url <- paste0("http://127.0.0.1:", port, "/")
  deadline <- Sys.time() + timeout
  repeat {
    if (!process$is_alive()) {
      log <- if (file.exists(log_file)) {
        paste(utils::tail(readLines(log_file, warn = FALSE), 20), collapse = "\n")
      } else {
        ""
      }
      stop("TensorBoard exited before answering (status ", process$get_exit_status(), ").\n", log,
           "\nIs the tensorboard Python package installed in ", python, "?", call. = FALSE)
    }
    if (url_answers(url)) break
    if (Sys.time() > deadline) {
      try(process$kill_tree(), silent = TRUE)
      stop("TensorBoard did not answer at ", url, " within ", timeout, " seconds; see ", log_file, ".",
           call. = FALSE)
    }
    Sys.sleep(0.25)
  }
  .globals$tensorboard <- list(process = process, url = url, port = port, log = log_file)
  message("TensorBoard at ", url, " (stop it with tpu_tensorboard(action = \"stop\"))")
  if (launch_browser) utils::browseURL(url)
  invisible(structure(url, process = process))
}

tensorboard_stop <- function() {
  tb <- .globals$tensorboard
  .globals$tensorboard <- NULL
  if (is.null(tb)) return(FALSE)
  p <- tb$process
  if (p$is_alive()) {
    tryCatch(p$kill_tree(), error = function(e) p$kill())
    p$wait(5000)
  }
  TRUE
}

tensorboard_logdir_args <- function(run_or_dir) {
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
  dirs <- normalizePath(run_or_dir, winslash = "/")
  if (length(dirs) == 1L) return(c("--logdir", dirs))
  # TensorBoard 2.x takes one --logdir; several runs go through --logdir_spec name:dir,...
  spec <- paste0(basename(dirs), ":", dirs, collapse = ",")
  c("--logdir_spec", spec)
}

free_port <- function(from = 6006L, to = 6106L) {
  for (port in seq.int(from, to)) {
    ok <- tryCatch({
      s <- serverSocket(port)
      close(s)
      TRUE
    }, error = function(e) FALSE, warning = function(w) FALSE)
    if (ok) return(port)
  }
  stop("No free port between ", from, " and ", to, " for TensorBoard; pass `port` explicitly.", call. = FALSE)
}

url_answers <- function(address) {
  con <- NULL
  ok <- tryCatch({
    con <- suppressWarnings(url(address, open = "rb"))
    TRUE
  }, error = function(e) FALSE, warning = function(w) FALSE)
  if (!is.null(con)) try(close(con), silent = TRUE)
  ok
}
