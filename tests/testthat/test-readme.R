# Issue 22.8 and 22.1: every line of the R quick start runs (docs/getting-started-r.md's "## R
# quick start", whose lines README.md's shorter quick start repeats; training shortened to 20
# steps; install_tpuestimator() is left out: it needs the network, and
# tests/python/test_distribution.py installs the package that way), and running the training
# line again -- as a new session in the same folder would -- resumes instead of failing.

repo_file <- function(...) {
  path <- file.path(testthat::test_path("..", ".."), ...)
  if (!file.exists(path)) path <- file.path(fixtures_dir() %||% "", "..", "..", ...)
  skip_if_not(file.exists(path), paste(file.path(...), "is not here (installed tests)"))
  path
}

# The first ```r block of the section `heading` of a Markdown file.
r_block <- function(path, heading) {
  lines <- readLines(path, warn = FALSE)
  start <- which(lines == heading)
  expect_length(start, 1L)
  rest <- lines[(start + 1L):length(lines)]
  ends <- which(startsWith(rest, "## "))
  if (length(ends)) rest <- rest[seq_len(ends[[1]] - 1L)]
  open <- which(rest == "```r")[[1]]
  close <- which(rest == "```" & seq_along(rest) > open)[[1]]
  rest[(open + 1L):(close - 1L)]
}

readme_quick_start <- function() {
  code <- r_block(repo_file("docs", "getting-started-r.md"), "## R quick start")
  # README.md's quick start is these lines, in this order: running these runs it.
  short <- r_block(repo_file("README.md"), "## R quick start")
  expect_gte(length(short), 8L)
  expect_identical(code[code %in% short], short)
  # and so is the R package site's home page (pkgdown/index.md, first lines of the same)
  home <- file.path(testthat::test_path("..", ".."), "pkgdown", "index.md")
  if (file.exists(home)) {
    home_lines <- r_block(home, "# tpuestimatorr")
    expect_identical(code[code %in% home_lines], home_lines)
  }
  code
}

test_that("the R quick start (docs and README) runs line by line, and its training reruns", {
  skip_if_no_tpuestimator()
  code <- readme_quick_start()
  expect_true(any(grepl("install_tpuestimator()", code, fixed = TRUE)))
  code <- code[!grepl("^install_tpuestimator\\(\\)", code)]
  code <- gsub("train.max_steps = 300", "train.max_steps = 20", code, fixed = TRUE)
  work <- local_work_dir()
  withr::local_envvar(R_USER_CACHE_DIR = file.path(work, ".cache"))
  # a loaded test machine can take TensorBoard past its default 60 s to answer
  withr::local_options(tpuestimatorr.verbose = FALSE, tpuestimatorr.tensorboard_timeout = 300)
  withr::defer(try(tpu_tensorboard(action = "stop"), silent = TRUE))
  env <- new.env(parent = globalenv())
  exprs <- parse(text = code, keep.source = FALSE)
  expect_gte(length(exprs), 10L)
  for (expr in exprs) {
    if (identical(expr, quote(library(tpuestimatorr)))) next  # loaded by the test run already
    quietly(eval(expr, env))
  }
  expect_s3_class(env$run, "tpu_run")
  expect_equal(env$run$global_step, 20L)
  expect_true(all(c("class_id", "class") %in% names(env$preds)))
  expect_s3_class(env$mt, "tpu_run")
  expect_equal(nrow(env$runs), 2L)
  expect_setequal(env$runs$flag_learning_rate, c(1e-3, 1e-2))
  # the example's folder does not depend on the session (issue 22.1): it is in the user's cache
  example <- tpu_example("digits")
  expect_true(startsWith(example, normalizePath(file.path(work, ".cache"))))
  expect_identical(example, normalizePath(file.path(tools::R_user_dir("tpuestimatorr", "cache"),
                                                    "examples", "digits", "digits.yaml")))
  # so the training line again resumes from models/digits instead of a ModelDirConflictError
  assigns_run <- function(e) identical(e[[1]], as.name("<-")) && identical(e[[2]], as.name("run"))
  again <- quietly(eval(exprs[[which(vapply(exprs, assigns_run, logical(1)))]], env))
  expect_equal(again$global_step, 20L)
  expect_identical(tpu_run_info(again$run_dir)$properties$resumed_from_step, "20")
})
