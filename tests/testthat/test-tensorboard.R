pid_alive <- function(pid) {
  if (requireNamespace("ps", quietly = TRUE)) {
    h <- tryCatch(ps::ps_handle(pid), error = function(e) NULL)
    if (is.null(h)) return(FALSE)
    return(isTRUE(tryCatch(ps::ps_is_running(h) && ps::ps_status(h) != "zombie", error = function(e) FALSE)))
  }
  isTRUE(tools::pskill(pid, 0L))
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

test_that("tpu_tensorboard() starts a server that answers, and stop leaves no process", {
  skip_if_no_tpuestimator()
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z")
  url <- suppressMessages(tpu_tensorboard(runs, launch_browser = FALSE, timeout = 300))
  pid <- attr(url, "pid")
  expect_match(url, "^http://127\\.0\\.0\\.1:[0-9]+/$")
  expect_true(pid_alive(pid))
  expect_true(url_answers(url))
  # a second start replaces the first server
  url2 <- suppressMessages(tpu_tensorboard(file.path(runs, "2026-11-29T10-00-00Z"), launch_browser = FALSE,
                                           timeout = 300))
  expect_false(pid_alive(pid))
  expect_true(isTRUE(tpu_tensorboard(action = "stop")))
  expect_false(pid_alive(attr(url2, "pid")))
  expect_false(url_answers(url2))
  expect_false(isTRUE(tpu_tensorboard(action = "stop")))  # nothing left to stop
})

test_that("tpu_tensorboard() names a missing folder", {
  expect_error(tpu_tensorboard(file.path(tempfile(), "nope"), launch_browser = FALSE), "do not exist")
})
