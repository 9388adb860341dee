pid_alive <- function(pid) {
  if (requireNamespace("ps", quietly = TRUE)) {
    h <- tryCatch(ps::ps_handle(pid), error = function(e) NULL)
    if (is.null(h)) return(FALSE)
    return(isTRUE(tryCatch(ps::ps_is_running(h) && ps::ps_status(h) != "zombie", error = function(e) FALSE)))
  }
  isTRUE(tools::pskill(pid, 0L))
}

test_that("tensorboard() starts a server that answers, and stop leaves no process", {
  skip_if_no_tpuestimator()
  python <- skip_if_no_python_exe()
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z")
  url <- suppressMessages(tpu_tensorboard(runs, launch_browser = FALSE, timeout = 120))
  process <- attr(url, "process")
  expect_match(url, "^http://127\\.0\\.0\\.1:[0-9]+/$")
  expect_true(process$is_alive())
  expect_true(tpuestimatorr:::url_answers(url))
  pids <- process$get_pid()
  if (requireNamespace("ps", quietly = TRUE)) {
    kids <- tryCatch(ps::ps_children(process$as_ps_handle(), recursive = TRUE), error = function(e) list())
    pids <- c(pids, vapply(kids, ps::ps_pid, 1L))
  }
  # a second start replaces the first server
  url2 <- suppressMessages(tpu_tensorboard(file.path(runs, "2026-11-29T10-00-00Z"), launch_browser = FALSE, timeout = 120))
  expect_false(process$is_alive())
  expect_true(isTRUE(tpu_tensorboard(action = "stop")))
  expect_false(attr(url2, "process")$is_alive())
  expect_false(tpuestimatorr:::url_answers(url2))
  Sys.sleep(0.5)
  for (pid in pids) expect_false(pid_alive(pid), info = paste("pid", pid))
  expect_false(isTRUE(tpu_tensorboard(action = "stop")))  # nothing left to stop
})

test_that("tensorboard() names a missing folder", {
  expect_error(tpu_tensorboard(file.path(tempfile(), "nope"), launch_browser = FALSE), "do not exist")
})
