# Inside tfruns::training_run() the record goes into tfruns's active run folder.
# tfruns itself is not installable here, so a minimal stand-in package provides the three
# functions tpuestimatorr calls (is_run_active, run_dir, write_run_metadata).

local_tfruns_stub <- function(env = parent.frame()) {
  if (requireNamespace("tfruns", quietly = TRUE) && !isTRUE(attr(asNamespace("tfruns"), "stub"))) {
    skip("the real tfruns is installed; the stand-in is not needed")
  }
  lib <- tfruns_stub_lib()
  withr::local_libpaths(lib, action = "prefix", .local_envir = env)
  withr::defer(try(unloadNamespace("tfruns"), silent = TRUE), envir = env)
  loadNamespace("tfruns")
}

# The stand-in's library, installed once per test session (an R CMD INSTALL is about 2 CPU s).
tfruns_stub <- new.env()

tfruns_stub_lib <- function() {
  if (!is.null(tfruns_stub$lib)) return(tfruns_stub$lib)
  src <- file.path(tempfile("tfruns-src-"), "tfruns")
  dir.create(file.path(src, "R"), recursive = TRUE)
  writeLines(c("Package: tfruns", "Version: 0.0.0.9000", "Title: Stand-in for tests",
               "Description: Stand-in for tests.", "License: MIT", "Author: tests",
               "Maintainer: tests <t@example.org>"),
             file.path(src, "DESCRIPTION"))
  writeLines(c("export(is_run_active, run_dir, write_run_metadata, stub_begin, stub_end)"), file.path(src, "NAMESPACE"))
  writeLines(c(
    ".state <- new.env()",
    "is_run_active <- function() !is.null(.state$dir)",
    "run_dir <- function() .state$dir",
    "write_run_metadata <- function(type, data, run_dir = NULL) {",
    "  .state$written <- c(.state$written, type)",
    "  invisible(NULL)",
    "}",
    "stub_begin <- function(dir) {",
    "  dir.create(file.path(dir, 'tfruns.d', 'properties'), recursive = TRUE)",
    "  writeLines('1795000000.000', file.path(dir, 'tfruns.d', 'properties', 'start'))",
    "  writeLines('train.R', file.path(dir, 'tfruns.d', 'properties', 'script'))",
    "  writeLines('FALSE', file.path(dir, 'tfruns.d', 'properties', 'completed'))",
    "  writeLines('> tpu_train(...)', file.path(dir, 'tfruns.d', 'properties', 'output'))",
    "  .state$dir <- dir",
    "}",
    "stub_end <- function() .state$dir <- NULL"
  ), file.path(src, "R", "stub.R"))
  lib <- tempfile("tfruns-lib-")
  dir.create(lib)
  out <- system2(file.path(R.home("bin"), "R"),
                 c("CMD", "INSTALL", "--no-test-load", paste0("--library=", shQuote(lib)), shQuote(src)),
                 stdout = TRUE, stderr = TRUE)
  if (!file.exists(file.path(lib, "tfruns", "DESCRIPTION"))) {
    stop("could not install the tfruns stand-in:\n", paste(out, collapse = "\n"))
  }
  tfruns_stub$lib <- lib
  lib
}

# tfruns's active run under `work` on the stand-in; it ends before the stand-in is unloaded
# (defers run last in, first out). Returns the stand-in's namespace.
local_active_run <- function(active, env = parent.frame()) {
  tfruns_ns <- local_tfruns_stub(env)
  tfruns_ns$stub_begin(active)
  withr::defer(tfruns_ns$stub_end(), envir = env)
  tfruns_ns
}

test_that("inside an active tfruns run, tpu_train() records into tfruns's run folder", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  active <- file.path(work, "runs", "2026-11-29T09-00-00Z")
  tfruns_ns <- local_active_run(active)
  before <- tfruns_rule_snapshot(work)
  trained <- with_warnings(suppressMessages(
    tpu_train(fixture_path("parity", "parity.yaml"), verbose = FALSE, model_dir = "models/p")
  ))
  run <- trained$value
  warned <- trained$warnings
  # a model dir inside the working dir: tfruns's changed-file copy would take its checkpoints,
  # and tpu_train() says so
  copied <- tfruns_rule_copied_files(before, tfruns_rule_snapshot(work), active)
  expect_true(any(startsWith(copied, "models/p/")))
  expect_true(any(grepl("will copy its checkpoints", warned, fixed = TRUE)))
  expect_identical(normalizePath(run$run_dir), normalizePath(active))
  expect_equal(nrow(tpu_ls_runs("runs")), 1L)                  # no second run folder
  meta <- file.path(active, "tfruns.d")
  expect_true(file.exists(file.path(meta, "evaluation.json")))
  expect_true(file.exists(file.path(meta, "metrics.json")))
  expect_identical(readLines(file.path(meta, "properties", "script")), "train.R")     # tfruns's own kept
  expect_identical(readLines(file.path(meta, "properties", "start")), "1795000000.000")
  # tfruns owns `output` (its sink() of the R console) and `completed` (TRUE once the whole
  # script has run): R/training_run.R, do_training_run()
  expect_identical(readLines(file.path(meta, "properties", "output")), "> tpu_train(...)")
  expect_identical(readLines(file.path(meta, "properties", "completed")), "FALSE")
  expect_true(dir.exists(file.path(active, "logs")))
  expect_tfruns_run(active)
  tfruns_ns$stub_end()
  # without an active run, a second training makes its own folder again
  run2 <- quietly(tpu_train(fixture_path("parity", "parity.yaml"), verbose = FALSE, model_dir = "models/q"))
  expect_false(identical(normalizePath(run2$run_dir), normalizePath(active)))
  expect_equal(nrow(tpu_ls_runs("runs")), 2L)
})

test_that("inside tfruns's run: checkpoints stay out of the working dir, the config is archived", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  active <- file.path(work, "runs", "2026-11-29T09-00-00Z")
  local_active_run(active)
  before <- tfruns_rule_snapshot(work)
  trained <- with_warnings(suppressMessages(tpu_train(fixture_path("parity", "parity.yaml"), verbose = FALSE)))
  run <- trained$value
  warned <- trained$warnings
  # tfruns's changed-file copy (R/training_run.R, with_changed_file_copy(); restated in
  # helper-tfruns-rules.R) finds nothing to copy: the run's own files have the run's name in
  # their path, and runs/.models is a hidden folder, which fileSnapshot() does not list
  expect_identical(tfruns_rule_copied_files(before, tfruns_rule_snapshot(work), active), character())
  expect_false(any(grepl("will copy its checkpoints", warned, fixed = TRUE)))
  expect_true(length(list.files(file.path(work, "runs", ".models", basename(active)), recursive = TRUE)) > 0L)
  # issue 12.5: the default model dir is under the runs folder (tfruns does not copy it as a changed
  # file of the working dir) and outside the run (the export is stored once, as the run's export/)
  expect_identical(normalizePath(run$model_dir), normalizePath(file.path(work, "runs", ".models", basename(active))))
  expect_false(dir.exists(file.path(work, "models")))
  files <- utils::untar(file.path(active, "tfruns.d", "source.tar.gz"), list = TRUE)
  expect_true(all(c("source/parity.yaml", "source/resolved_config.yaml") %in% files))
  expect_false(any(grepl("ckpt", list.files(active, recursive = TRUE))))
})
