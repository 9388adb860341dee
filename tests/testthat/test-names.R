# Issue 22.4: what ls_runs(), view_run(), compare_runs(), tensorboard(), train(), evaluate() and
# export_savedmodel() do must not depend on the order of library() calls. A stand-in tensorflow
# (the real one is not installable here) has its generics of those names; tfruns is the real
# one when ../shared/vendor has it. Each order runs in a fresh R process.

install_tensorflow_standin <- function(lib) {
  src <- file.path(tempfile("tf-src-"), "tensorflow")
  dir.create(file.path(src, "R"), recursive = TRUE)
  writeLines(c("Package: tensorflow", "Version: 0.0.0.9000", "Title: Stand-in for tests",
               "Description: Stand-in for tests.", "License: MIT", "Author: tests",
               "Maintainer: tests <t@example.org>"), file.path(src, "DESCRIPTION"))
  writeLines(c("export(train, evaluate, export_savedmodel, tensorboard)",
               "S3method(train, fake_tf_model)", "S3method(evaluate, fake_tf_model)"),
             file.path(src, "NAMESPACE"))
  writeLines(c(
    "train <- function(object, ...) UseMethod('train')",
    "evaluate <- function(object, ...) UseMethod('evaluate')",
    "export_savedmodel <- function(object, export_dir_base, ...) UseMethod('export_savedmodel')",
    "tensorboard <- function(log_dir, ...) 'tensorflow tensorboard'",
    "train.fake_tf_model <- function(object, ...) 'tensorflow train'",
    "evaluate.fake_tf_model <- function(object, ...) 'tensorflow evaluate'"
  ), file.path(src, "R", "tf.R"))
  args <- c("CMD", "INSTALL", "--no-test-load", paste0("--library=", shQuote(lib)), shQuote(src))
  out <- system2(file.path(R.home("bin"), "R"), args, stdout = TRUE, stderr = TRUE)
  if (!file.exists(file.path(lib, "tensorflow", "DESCRIPTION"))) stop(paste(out, collapse = "\n"))
}

names_in_order <- function(pkg_dir, libs, first_ours) {
  callr::r(function(pkg_dir, first_ours, has_tfruns) {
    attach_ours <- function() suppressMessages(pkgload::load_all(pkg_dir, export_all = FALSE, quiet = TRUE))
    attach_theirs <- function() {
      suppressPackageStartupMessages(library(tensorflow))
      if (has_tfruns) suppressPackageStartupMessages(library(tfruns))
    }
    if (first_ours) {
      attach_ours()
      attach_theirs()
    } else {
      attach_theirs()
      attach_ours()
    }
    est <- structure(new.env(), class = "tpu_estimator")
    owner <- function(name) if (exists(name)) environmentName(environment(get(name))) else NA_character_
    list(
      ls_runs = owner("ls_runs"), view_run = owner("view_run"), compare_runs = owner("compare_runs"),
      latest_run = owner("latest_run"), tensorboard = tensorboard("runs"),
      tpu_ls_runs = owner("tpu_ls_runs"),
      train_ours = tryCatch(train(est, steps = "x"), error = conditionMessage),
      evaluate_ours = tryCatch(evaluate(est, data = 1), error = conditionMessage),
      train_theirs = train(structure(list(), class = "fake_tf_model")),
      evaluate_theirs = evaluate(structure(list(), class = "fake_tf_model"))
    )
  }, args = list(pkg_dir = pkg_dir, first_ours = first_ours, has_tfruns = requireNamespace("tfruns", quietly = TRUE)),
  libpath = libs)
}

test_that("either attach order: tfruns's and tensorflow's names stay theirs, train() reaches both", {
  skip_if_not(requireNamespace("callr", quietly = TRUE) && requireNamespace("pkgload", quietly = TRUE),
              "callr and pkgload run the attach orders in fresh processes")
  pkg_dir <- normalizePath(testthat::test_path("..", ".."))
  skip_if_not(file.exists(file.path(pkg_dir, "DESCRIPTION")), "the package source is not here (installed tests)")
  local_real_tfruns()
  lib <- tempfile("tf-standin-lib-")
  dir.create(lib)
  install_tensorflow_standin(lib)
  libs <- c(lib, .libPaths())
  for (first_ours in c(TRUE, FALSE)) {
    got <- names_in_order(pkg_dir, libs, first_ours)
    info <- paste("tpuestimatorr attached", if (first_ours) "first" else "last")
    for (name in c("ls_runs", "view_run", "compare_runs", "latest_run")) {
      expect_identical(got[[name]], "tfruns", info = info)
    }
    expect_identical(got$tensorboard, "tensorflow tensorboard", info = info)
    expect_identical(got$tpu_ls_runs, "tpuestimatorr", info = info)
    expect_match(got$train_ours, "`steps`", info = info)            # our method, through either generic
    expect_match(got$evaluate_ours, "`data`", info = info)
    expect_identical(got$train_theirs, "tensorflow train", info = info)  # theirs, through either generic
    expect_identical(got$evaluate_theirs, "tensorflow evaluate", info = info)
  }
})
