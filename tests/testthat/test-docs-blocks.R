# The R blocks of docs/deploying.md and docs/tuning.md run as written (issue 32, item 4): each
# test reads its block from the page at test time, applies only the substitutions listed in it
# (each must still match the page), and runs the lines in a scratch folder laid out as the page
# assumes (a trained models/digits and new/*.tfrecord; digits.yaml; train.R). Trainings are
# shortened to 20 steps, and those whose block uses no export skip it (`export = FALSE`: the
# tunings compare evaluations; an export is about a third of a 20-step training's CPU time).

docs_page <- function(page) {
  path <- file.path(testthat::test_path("..", ".."), "docs", page)
  skip_if_not(file.exists(path), paste("docs/", page, "is not here (installed tests)"))
  path
}

# The lines of the ```r block of docs/`page` whose first line starts with `first`.
docs_r_block <- function(page, first) {
  lines <- readLines(docs_page(page), warn = FALSE)
  opens <- which(lines == "```r" & startsWith(c(lines[-1], ""), first))
  expect_length(opens, 1L)
  rest <- lines[(opens + 1L):length(lines)]
  rest[seq_len(which(startsWith(rest, "```"))[[1]] - 1L)]
}

# `code` with each name of `subs` replaced by its value; every name must occur.
substitute_page <- function(code, subs) {
  for (old in names(subs)) {
    expect_true(any(grepl(old, code, fixed = TRUE)), info = paste("the page no longer has", old))
    code <- gsub(old, subs[[old]], code, fixed = TRUE)
  }
  code
}

# tfruns shows a comparison through R's help server: http://127.0.0.1:PORT/session/<folder>/<file>,
# the folder being in tempdir().
comparison_page <- function(url) file.path(tempdir(), sub("^http://127\\.0\\.0\\.1:[0-9]+/session/", "", url))

run_lines <- function(code, env) {
  for (expr in parse(text = code, keep.source = FALSE)) suppressMessages(suppressWarnings(eval(expr, env)))
  env
}

test_that("docs/deploying.md's R block evaluates an export and predicts new records", {
  skip_if_no_tpuestimator()
  code <- substitute_page(docs_r_block("deploying.md", "m <- tpu_evaluate("),
                          c("export/final/1500" = "export/final/20"))   # the 20-step training's export
  work <- local_work_dir()
  withr::local_envvar(R_USER_CACHE_DIR = file.path(work, ".cache"))
  withr::local_options(tpuestimatorr.verbose = FALSE)
  # the page's setting: the quick start's `run` (models/digits) and new records in new/
  run <- quietly(tpu_train(tpu_example("digits"), train.max_steps = 20))
  dir.create("new")
  file.copy(file.path(dirname(tpu_example("digits")), "eval.tfrecord"), file.path("new", "a.tfrecord"))
  env <- run_lines(code, list2env(list(run = run), parent = globalenv()))
  expect_identical(env$m$num_examples, 360L)
  expect_equal(env$m$accuracy, run$metrics$accuracy, tolerance = 1e-6)
  expect_identical(names(env$m$per_class), c("class_id", "class", "precision", "recall", "f1", "support"))
  expect_identical(dim(env$m$confusion_matrix), c(10L, 10L))
  expect_identical(nrow(env$p), 360L)
  expect_identical(names(env$p)[1:4], c("source", "index", "class_id", "class"))
  expect_true(file.exists("preds.parquet") && file.size("preds.parquet") > 0)
})

test_that("docs/tuning.md's tpu_tuning_run() block tunes three learning rates from digits.yaml", {
  skip_if_no_tpuestimator()
  code <- substitute_page(docs_r_block("tuning.md", "runs <- tpu_tuning_run("),
                          c("train.max_steps = 300" = "train.max_steps = 20, export = FALSE"))
  shown <- local_tfruns_page()
  file.copy(list.files(dirname(tpu_example("digits")), full.names = TRUE), ".")    # digits.yaml here
  env <- run_lines(code, new.env(parent = environment()))
  expect_equal(nrow(env$runs), 3L)
  expect_setequal(env$runs$flag_learning_rate, c(1e-3, 3e-3, 1e-2))
  expect_true(all(env$runs$global_step == 20L))
  expect_false(is.unsorted(env$runs$eval_loss))                     # best first
  expect_length(shown(), 1L)                                          # compare_runs() showed its page
  expect_gt(file.size(comparison_page(shown())), 10000)
})

test_that("docs/tuning.md's tfruns script and its training_run() and tuning_run() lines run", {
  skip_if_no_tpuestimator()
  script <- substitute_page(docs_r_block("tuning.md", "# train.R"),
                            c('flag_integer("max_steps", 300)' = 'flag_integer("max_steps", 20)',
                              'tpu_train(tpu_example("digits"))' = 'tpu_train(tpu_example("digits"), export = FALSE)'))
  code <- docs_r_block("tuning.md", 'tfruns::training_run("train.R")')
  shown <- local_tfruns_page()
  writeLines(script, "train.R")
  env <- run_lines(code, new.env(parent = environment()))
  runs <- tfruns::ls_runs(order = "eval_loss", decreasing = FALSE)
  expect_equal(nrow(runs), 3L)                                       # one training, two tuned
  expect_setequal(runs$flag_learning_rate, c(0.003, 0.001, 0.01))
  expect_false(is.unsorted(runs$eval_loss))
  for (dir in runs$run_dir) {
    expect_identical(readLines(file.path(dir, "tfruns.d", "properties", "global_step")), "20")
  }
  expect_length(shown(), 1L)                                          # compare_runs(): the two latest
  expect_gt(file.size(comparison_page(shown())), 10000)
})

# The lines of the chunk labelled `label` in vignettes/`file` (the pkgdown articles).
vignette_chunk <- function(file, label) {
  path <- file.path(testthat::test_path("..", ".."), "vignettes", file)
  skip_if_not(file.exists(path), paste("vignettes/", file, "is not here (installed tests)"))
  lines <- readLines(path, warn = FALSE)
  open <- grep(paste0("^```\\{r ", label, "[,}]"), lines)
  expect_length(open, 1L)
  rest <- lines[(open + 1L):length(lines)]
  rest[seq_len(which(startsWith(rest, "```"))[[1]] - 1L)]
}

# Knitting the vignettes (R CMD check, pkgdown) runs every chunk but these `eval = FALSE` ones:
# they open a browser, start TensorBoard or need tfruns. `install` alone is not run anywhere:
# it pip-installs from the network (tests/python/test_distribution.py runs the package's
# install from a local checkout).
test_that("the vignettes' eval = FALSE chunks run: the report, TensorBoard and the comparison", {
  skip_if_no_tpuestimator()
  board <- vignette_chunk("getting-started.Rmd", "tensorboard")
  view <- vignette_chunk("tuning-with-tfruns.Rmd", "view")
  work <- local_work_dir()
  withr::local_envvar(R_USER_CACHE_DIR = file.path(work, ".cache"))
  opened <- character()
  # what a browser would be given (interactive sessions open it; here it is recorded)
  withr::local_options(tpuestimatorr.verbose = FALSE, browser = function(url) opened <<- c(opened, url))
  withr::defer(try(tpu_tensorboard(action = "stop"), silent = TRUE))
  run <- quietly(tpu_train(tpu_example("digits", dir = "digits"), train.max_steps = 20L, export = FALSE))
  runs <- quietly(tpu_tuning_run(tpu_example("digits", dir = "digits"), flags = list(learning_rate = c(0.001, 0.01)),
                                 train.max_steps = 20L, export = FALSE))
  env <- new.env(parent = environment())
  values <- lapply(parse(text = c(board, view), keep.source = FALSE), function(expr) {
    withVisible(suppressMessages(eval(expr, env)))$value
  })
  report <- values[[1]]
  expect_true(file.exists(report) && grepl("<html", paste(readLines(report, warn = FALSE), collapse = ""),
                                           ignore.case = TRUE))
  url <- values[[2]]
  expect_match(url, "^http://(127\\.0\\.0\\.1|localhost):[0-9]+")
  expect_true(isTRUE(values[[3]]))                                   # the server stopped
  comparison <- values[[4]]
  expect_true(file.exists(comparison) && file.size(comparison) > 10000)
  expect_match(paste(readLines(comparison, warn = FALSE), collapse = "\n"), basename(runs$run_dir[[2]]),
               fixed = TRUE)
})

test_that("the tfruns vignette's tfruns chunk runs its script under the real tfruns", {
  skip_if_no_tpuestimator()
  code <- vignette_chunk("tuning-with-tfruns.Rmd", "tfruns")
  shown <- local_tfruns_page()
  exprs <- parse(text = code, keep.source = FALSE)
  env <- new.env(parent = environment())
  suppressMessages(eval(exprs[[1]], env))                            # file.copy() of the package's train.R
  # the substitutions, in the copied script: 300 training steps -> 20, no export (unused)
  script <- substitute_page(readLines("train.R"),
                            c('flag_integer("max_steps", 300' = 'flag_integer("max_steps", 20',
                              'tpu_train(tpu_example("digits"))' = 'tpu_train(tpu_example("digits"), export = FALSE)'))
  writeLines(script, "train.R")
  values <- list()
  utils::capture.output(   # the scripts' echo (training_run() sources them with echo = TRUE)
    values <- lapply(exprs[-1], function(expr) suppressMessages(suppressWarnings(eval(expr, env)))))
  runs <- values[[3]]                                                # the ls_runs() line: best first
  expect_equal(nrow(runs), 3L)                                       # one training, two tuned
  expect_setequal(runs$flag_learning_rate, c(0.003, 0.001, 0.01))
  expect_false(is.unsorted(runs$eval_loss))
  expect_length(shown(), 1L)                                           # compare_runs() showed the two latest
  expect_gt(file.size(comparison_page(shown())), 10000)
})
