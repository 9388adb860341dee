# Issue 13.3 from R: tpu_train() runs the job inside the R process and installs no signal
# handlers, so R's own Ctrl-C handling stays in charge. A Ctrl-C (SIGINT to the R process)
# during training reaches Python as KeyboardInterrupt: the run is recorded "interrupted", the
# model dir's lock is released, R gets its usual interrupt condition, and tpu_train() again
# resumes from the last periodic checkpoint.

# A child Rscript running `lines` in the test's working folder, with this session's library
# paths (so the installed package), its output in child.log; `wait = FALSE` returns at once.
run_child_r <- function(lines, wait = TRUE) {
  writeLines(lines, "child.R")
  env <- c(paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)))
  system2(file.path(R.home("bin"), "Rscript"), "child.R", env = env, wait = wait, stdout = "child.log",
          stderr = "child.log")
}

child_log <- function() paste(readLines("child.log"), collapse = "\n")

# The child's lines calling tpu_train(cfg, <args>) into m/ and runs/, writing its outcome
# ("interrupt", or the error's message) to the file outcome.
child_train_lines <- function(args) {
  c("res <- tryCatch(",
    sprintf("  tpu_train(cfg, %s, model_dir = 'm', runs_dir = 'runs', verbose = FALSE),", args),
    "  interrupt = function(e) 'interrupt', error = function(e) conditionMessage(e))",
    "writeLines(format(res)[1], 'outcome')")
}

# The one run in runs/ recorded interrupted by a KeyboardInterrupt, the model dir's lock released.
expect_run_interrupted <- function(log) {
  runs <- tpu_ls_runs("runs")
  expect_identical(runs$status, "interrupted", info = log)
  expect_match(runs$interrupted, "KeyboardInterrupt", info = log)
  expect_false(file.exists(file.path("m", "tpuestimator.lock")))
}

test_that("Ctrl-C in R during tpu_train() records an interrupted run that a rerun resumes", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  run_child_r(c(
    "library(tpuestimatorr)",
    "writeLines(as.character(Sys.getpid()), 'pid')",
    sprintf("cfg <- '%s'", fixture_path("parity", "parity.yaml")),
    child_train_lines("train.max_steps = 1000000L, train.iterations_per_loop = 5L, train.save_checkpoints_steps = 100L")
  ), wait = FALSE)
  deadline <- Sys.time() + 180
  while (!file.exists(file.path("m", "checkpoint")) && Sys.time() < deadline) Sys.sleep(0.2)
  expect_true(file.exists(file.path("m", "checkpoint")), info = child_log())
  tools::pskill(as.integer(readLines("pid")), tools::SIGINT)
  while (!file.exists("outcome") && Sys.time() < deadline) Sys.sleep(0.2)
  log <- child_log()
  expect_identical(readLines("outcome"), "interrupt", info = log)

  expect_run_interrupted(log)
  index <- readLines(file.path("m", "checkpoint"))
  step <- as.integer(sub(".*ckpt-([0-9]+).*", "\\1", grep("^model_checkpoint_path", index, value = TRUE)))
  expect_gte(step, 100L)
  run <- suppressMessages(tpu_train(fixture_path("parity", "parity.yaml"), train.max_steps = step + 10L,
                                    train.iterations_per_loop = 5L, train.save_checkpoints_steps = 100L,
                                    model_dir = "m", runs_dir = "runs", verbose = FALSE, resume = TRUE))
  expect_identical(run$global_step, step + 10L)
  expect_identical(tpu_ls_runs("runs")$resumed_from_step[[1]], step)
})

test_that("tpu_train() on a model dir another job trains fails with a model-dir-locked condition", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  dir <- local_work_dir()
  lock <- reticulate::import("tpuestimator.jobs.model_dir_lock")$ModelDirLock(file.path(dir, "m"),
                                                                         command = "tpuestimator train other.yaml")
  lock$acquire()
  on.exit(lock$release(), add = TRUE)
  err <- tryCatch(tpu_train(fixture_path("parity", "parity.yaml"), model_dir = "m", runs_dir = "runs",
                            verbose = FALSE),
                  error = function(e) e)
  expect_s3_class(err, "tpuestimator_model_dir_locked_error")
  expect_match(conditionMessage(err), "tpuestimator train other.yaml", fixed = TRUE)
  expect_match(conditionMessage(err), "--model-dir", fixed = TRUE)
  expect_identical(normalizePath(err$model_dir), normalizePath(file.path(dir, "m")))
  expect_false(dir.exists("runs"))
})

test_that("tpu_evaluate() refused by a training's lock names the training's pid, also as fields", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  dir <- local_work_dir()
  dir.create("m")
  file.copy(fixture_path("parity", "parity.yaml"), file.path("m", "config.yaml"))
  lock <- reticulate::import("tpuestimator.jobs.model_dir_lock")$ModelDirLock(file.path(dir, "m"),
                                                                         command = "tpuestimator train other.yaml")
  lock$acquire()
  on.exit(lock$release(), add = TRUE)
  err <- tryCatch(tpu_evaluate("m"), error = function(e) e)
  expect_s3_class(err, "tpuestimator_model_dir_locked_error")
  expect_identical(err$pid, Sys.getpid())
  expect_identical(err$owner$pid, Sys.getpid())
  expect_match(conditionMessage(err), paste("is being trained by pid", Sys.getpid()), fixed = TRUE)
})

test_that("a Ctrl-C that lands while an R callback runs records the run interrupted, not failed", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  # The hook sends this R process SIGINT and sleeps: R signals the interrupt inside the hook,
  # i.e. while Python is calling R (the moment the Ctrl-C test above hits only by chance).
  status <- run_child_r(c(
    "library(tpuestimatorr)",
    sprintf("cfg <- '%s'", fixture_path("parity", "parity.yaml")),
    "hook <- function(event, info) if (event == 'after_loop' && info$step >= 10) {",
    "  tools::pskill(Sys.getpid(), tools::SIGINT); Sys.sleep(5); cat('not interrupted\\n')",
    "}",
    child_train_lines("train.max_steps = 1000L, train.iterations_per_loop = 5L, hooks = hook")
  ))
  log <- child_log()
  expect_identical(status, 0L, info = log)
  expect_identical(readLines("outcome"), "interrupt", info = log)
  # R's interrupts are held while Python runs and allowed again inside the callback: the sleep
  # was cut short, not waited out.
  expect_false(grepl("not interrupted", log, fixed = TRUE), info = log)
  expect_run_interrupted(log)
})

test_that("a Ctrl-C that R code outside the package's callbacks would take still ends the run interrupted", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  # A Python hook calls a plain R function (no wrapper of ours, like the R code reticulate itself
  # runs around every callback) that sends its R process SIGINT and keeps evaluating R. Before
  # the bridge held R's interrupts, R took the Ctrl-C inside reticulate's call machinery and
  # Python got "RuntimeError: (Unknown exception occurred)": the run was recorded "failed" (or,
  # at other moments, never ended at all).
  status <- run_child_r(c(
    "library(tpuestimatorr)",
    sprintf("cfg <- '%s'", fixture_path("parity", "parity.yaml")),
    "signal_and_compute <- function() {",
    "  tools::pskill(Sys.getpid(), tools::SIGINT)",
    "  for (i in seq_len(200000L)) i",
    "  writeLines('computed', 'computed')",
    "}",
    "reticulate::py_run_string(paste(",
    "  'from tpuestimator.hooks import Hook',",
    "  'class CallsR(Hook):',",
    "  '    def __init__(self, f):',",
    "  '        self.f = f',",
    "  '    def after_loop(self, step, logs):',",
    "  '        if step >= 10:',",
    "  '            self.f()', sep = '\\n'))",
    "hook <- reticulate::py_eval('CallsR')(signal_and_compute)",
    child_train_lines("train.max_steps = 1000L, train.iterations_per_loop = 5L, hooks = hook"),
    "handler <- reticulate::py_eval(\"__import__('rpytools.signals').signals._callback.__name__\")",
    "writeLines(c(.Internal(interruptsSuspended()), handler), 'after')"
  ))
  log <- child_log()
  expect_identical(status, 0L, info = log)
  expect_true(file.exists("computed"), info = log)  # R did not take the Ctrl-C there
  expect_identical(readLines("outcome"), "interrupt", info = log)
  expect_run_interrupted(log)
  # Back in R after the job: R's interrupts are not left suspended and reticulate's handler
  # asks R again (its own callback, not the bridge's stand-in).
  expect_identical(readLines("after"), c("FALSE", "python_function"), info = log)
})
