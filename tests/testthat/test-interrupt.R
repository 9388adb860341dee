# Issue 13.3 from R: tpu_train() runs the job inside the R process and installs no signal
# handlers, so R's own Ctrl-C handling stays in charge. A Ctrl-C (SIGINT to the R process)
# during training reaches Python as KeyboardInterrupt: the run is recorded "interrupted", the
# model dir's lock is released, R gets its usual interrupt condition, and tpu_train() again
# resumes from the last periodic checkpoint.

# The four Ctrl-C cases run one after another in ONE child R session of the installed package
# (`library(tpuestimatorr)`): one R and TensorFlow start-up instead of four (about 7 CPU s
# each), and a session that goes on after a Ctrl-C, as a user's does. Each case works in its
# own folder of the child's working folder (its m/, runs/ and the file `outcome`); this
# process sends the Ctrl-Cs that come from outside (SIGINT to the child's R, as a terminal
# sends it). Built once per test session, on first use, so each test also runs alone.

interrupt_session <- new.env()

# The child's lines running `tpu_train(cfg, <args>)` in the folder `case`, its outcome
# ("interrupt", or the error's message) written to `case`/outcome.
case_train_lines <- function(case, args) {
  c(sprintf("dir.create('%s'); setwd('%s')", case, case),
    "res <- tryCatch(",
    sprintf("  tpu_train(cfg, %s, model_dir = 'm', runs_dir = 'runs', verbose = FALSE),", args),
    "  interrupt = function(e) 'interrupt', error = function(e) conditionMessage(e))",
    "writeLines(format(res)[1], 'outcome')",
    "setwd('..')")
}

# The folder of the child session, once it has run every case on `config` (or its time ran out).
interrupt_cases <- function(config) {
  if (!is.null(interrupt_session$dir)) return(interrupt_session$dir)
  dir <- tempfile("interrupt-cases-")
  dir.create(dir)
  withr::local_dir(dir)
  writeLines(c(
    "library(tpuestimatorr)",
    "writeLines(as.character(Sys.getpid()), 'pid')",
    sprintf("cfg <- '%s'", config),
    # random: trains until this process's Ctrl-C lands, wherever the job is then
    case_train_lines("random", paste("train.max_steps = 1000000L, train.iterations_per_loop = 5L,",
                                     "train.save_checkpoints_steps = 100L")),
    # hook: the hook sends its own R process SIGINT and sleeps: R signals the interrupt inside
    # the hook, i.e. while Python is calling R (the moment the random case hits only by chance)
    "hook <- function(event, info) if (event == 'after_loop' && info$step >= 10) {",
    "  tools::pskill(Sys.getpid(), tools::SIGINT); Sys.sleep(5); writeLines('slept', 'not-interrupted')",
    "}",
    case_train_lines("hook", "train.max_steps = 300L, train.iterations_per_loop = 5L, hooks = hook"),
    # plain: a Python hook calls a plain R function (no wrapper of ours, like the R code
    # reticulate itself runs around every callback) that sends its R process SIGINT and keeps
    # evaluating R
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
    "calls_r <- reticulate::py_eval('CallsR')(signal_and_compute)",
    case_train_lines("plain", "train.max_steps = 300L, train.iterations_per_loop = 5L, hooks = calls_r"),
    "handler <- reticulate::py_eval(\"__import__('rpytools.signals').signals._callback.__name__\")",
    "writeLines(c(.Internal(interruptsSuspended()), handler), file.path('plain', 'after'))",
    # progress: a long progress callback that this process's Ctrl-C lands in: 30 s of R
    # computation (R takes a Ctrl-C in a loop only where interrupts are allowed; Sys.sleep()
    # would be cut short even while they are held) that calls Python most of the time, so the
    # Ctrl-C lands in Python code run from R, which must leave it to R
    "progress <- function(event, info) if (event == 'loop' && info$step >= 10 && !file.exists('in-callback')) {",
    "  writeLines('computing', 'in-callback'); done <- Sys.time() + 30",
    "  while (Sys.time() < done) { i <- 0; reticulate::py_eval('sum(range(20000))') }",
    "  writeLines('slept', 'not-interrupted')",
    "}",
    case_train_lines("progress", "train.max_steps = 300L, train.iterations_per_loop = 5L, progress = progress"),
    # cluster: the R process's own SIGINT the moment the second task is forked (inside Python's
    # subprocess.Popen, before it returns): the task must not be lost to the interrupt
    "reticulate::py_run_string(paste(",
    "  'import os, signal, subprocess',",
    "  'cluster_started = []',",
    "  'class PopenInterruptedAtTheSecond(subprocess.Popen):',",
    "  '    def __init__(self, *args, **kwargs):',",
    "  '        super().__init__(*args, **kwargs)',",
    "  '        cluster_started.append(self)',",
    "  '        if len(cluster_started) == 2:',",
    "  '            os.kill(os.getpid(), signal.SIGINT)',",
    "  'real_popen, subprocess.Popen = subprocess.Popen, PopenInterruptedAtTheSecond', sep = '\\n'))",
    case_train_lines("cluster", "cluster = list(workers = 2L), run.strategy = 'multi_worker'"),
    "reticulate::py_run_string('subprocess.Popen = real_popen')",
    "writeLines(reticulate::py_eval('str([p.poll() for p in cluster_started])'), file.path('cluster', 'tasks'))",
    "handler <- reticulate::py_eval(\"__import__('rpytools.signals').signals._callback.__name__\")",
    "writeLines(c(.Internal(interruptsSuspended()), handler), file.path('cluster', 'after'))"
  ), "child.R")
  # the shell around Rscript keeps its exit status; the Ctrl-Cs go to the R process only
  env <- paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep))
  system2("sh", c("-c", shQuote(paste(env, shQuote(file.path(R.home("bin"), "Rscript")),
                                      "child.R >child.log 2>&1; echo $? >status"))), wait = FALSE)
  deadline <- Sys.time() + 600  # reached only when a case fails to end
  wait_for <- function(path) {
    while (!file.exists(path) && Sys.time() < deadline) Sys.sleep(0.1)
    file.exists(path)
  }
  if (wait_for("pid")) {
    pid <- as.integer(readLines("pid"))
    if (wait_for(file.path("random", "m", "checkpoint"))) tools::pskill(pid, tools::SIGINT)
    if (wait_for(file.path("progress", "in-callback"))) tools::pskill(pid, tools::SIGINT)
    if (!wait_for("status")) tools::pskill(pid, tools::SIGKILL)
  }
  interrupt_session$dir <- dir
  dir
}

# Works in the folder of the child session's `case`; returns the session's log.
local_interrupt_case <- function(case, config, env = parent.frame()) {
  dir <- interrupt_cases(config)
  log <- paste(readLines(file.path(dir, "child.log")), collapse = "\n")
  expect_true(dir.exists(file.path(dir, case)), info = log)
  withr::local_dir(file.path(dir, case), .local_envir = env)
  log
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
  log <- local_interrupt_case("random", fixture_path("parity", "parity.yaml"))
  expect_true(file.exists(file.path("m", "checkpoint")), info = log)
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
  log <- local_interrupt_case("hook", fixture_path("parity", "parity.yaml"))
  expect_identical(readLines(file.path("..", "status")), "0", info = log)
  expect_identical(readLines("outcome"), "interrupt", info = log)
  # R's interrupts are held while Python runs and allowed again inside the callback: the sleep
  # was cut short, not waited out.
  expect_false(file.exists("not-interrupted"), info = log)
  expect_run_interrupted(log)
})

test_that("a Ctrl-C from outside while a long R progress callback runs cuts the callback short", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  # docs/training.md "Signals": R's interrupts are held while the job runs, and an R callback
  # allows them again inside its own handler, so a long one is still cut short. The progress
  # callback says it has started, then computes in R for 30 s; this process sends the child's
  # R SIGINT meanwhile. Held there, the Ctrl-C would wait for the 30 s to end. tpu_train() then
  # signals R's interrupt condition (it once signalled an error "KeyboardInterrupt: Ctrl-C in R
  # (while an R callback ran)": R had taken the Ctrl-C inside the callback).
  log <- local_interrupt_case("progress", fixture_path("parity", "parity.yaml"))
  expect_true(file.exists("in-callback"), info = log)
  expect_identical(readLines("outcome"), "interrupt", info = log)
  expect_false(file.exists("not-interrupted"), info = log)
  expect_run_interrupted(log)
  expect_lt(tpu_ls_runs("runs")$global_step, 300L)
})

test_that("a Ctrl-C that R code outside the package's callbacks would take still ends the run interrupted", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  # Before the bridge held R's interrupts, R took the Ctrl-C inside reticulate's call machinery
  # and Python got "RuntimeError: (Unknown exception occurred)": the run was recorded "failed"
  # (or, at other moments, never ended at all).
  log <- local_interrupt_case("plain", fixture_path("parity", "parity.yaml"))
  expect_identical(readLines(file.path("..", "status")), "0", info = log)
  expect_true(file.exists("computed"), info = log)  # R did not take the Ctrl-C there
  expect_identical(readLines("outcome"), "interrupt", info = log)
  expect_run_interrupted(log)
  # Back in R after the job: R's interrupts are not left suspended and reticulate's handler
  # asks R again (its own callback, not the bridge's stand-in).
  expect_identical(readLines("after"), c("FALSE", "python_function"), info = log)
})

test_that("a Ctrl-C at the moment tpu_train(cluster =) starts a task still stops every task", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  # Raised inside subprocess.Popen, after the fork, the KeyboardInterrupt lost the task just
  # started, which trained on after tpu_train() had returned. The bridge's handler now leaves
  # the Ctrl-C pending until the task is held (system/processes.py `sigint_held`).
  log <- local_interrupt_case("cluster", fixture_path("parity", "parity.yaml"))
  expect_identical(readLines("outcome"), "interrupt", info = log)
  expect_identical(readLines("tasks"), "[-15, -15]", info = log)  # both stopped (SIGTERM), reaped
  # R's Ctrl-C handling is as it was: interrupts not left suspended, reticulate's handler asks R
  expect_identical(readLines("after"), c("FALSE", "python_function"), info = log)
})
