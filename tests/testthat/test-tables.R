# Tables from R: a data frame or a formula straight into a canned model; predict() on the run
# returns a data frame; bad tables are refused with the column named.

test_that("mtcars regression from a formula, with factor, character and logical predictors", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  cars <- mtcars
  cars$cyl <- factor(cars$cyl)
  cars$make <- ifelse(seq_len(nrow(cars)) %% 3 == 0, "a", "b")
  cars$am <- cars$am == 1
  run <- quietly(tpu_train(mpg ~ ., data = cars, model = "linear", train.max_steps = 200L,
                           train.batch_size = 8L, train.iterations_per_loop = 50L,
                           train.save_checkpoints_steps = 200L, eval.batch_size = 8L,
                           model_dir = file.path(work, "model"), runs_dir = file.path(work, "runs"),
                           verbose = FALSE))
  expect_s3_class(run, "tpu_run")
  expect_true(all(c("rmse", "mae", "r2") %in% names(run$metrics)))
  pred <- predict(run, cars[1:5, ])
  expect_s3_class(pred, "data.frame")
  expect_identical(nrow(pred), 5L)
  expect_true(is.numeric(pred$prediction) && all(is.finite(pred$prediction)))
  # The model learned mpg: its predictions follow base R's lm() on the same columns.
  all_pred <- predict(run, cars)$prediction
  ols <- fitted(lm(mpg ~ ., data = cars))
  expect_gt(cor(all_pred, ols), 0.9)
  expect_lt(sqrt(mean((all_pred - cars$mpg)^2)), 0.6 * sd(cars$mpg))
  newcar <- cars[1:2, names(cars) != "mpg"]
  newcar$make <- c("never seen", "b")  # an unseen category: the OOV bucket, no error
  unseen <- predict(run, newcar)$prediction
  expect_identical(length(unseen), 2L)
  expect_equal(unseen[2], all_pred[2], tolerance = 1e-5)   # row 2 is cars[2, ] as it was
  known <- predict(run, transform(newcar[c(1, 1), ], make = c("a", "b")))$prediction
  expect_true(is.finite(unseen[1]))
  expect_gt(min(abs(unseen[1] - known)), 1e-4)     # its own bucket, not a known make
  expect_error(predict(run, cars[1:2, c("disp", "hp")]), "column 'cyl' is missing")
})

test_that("iris classification from a data frame returns classes as a factor with probabilities", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  # levels in an order that is not alphabetical: factor() on the predicted names would not give it
  flowers <- transform(iris, Species = factor(Species, levels = c("virginica", "setosa", "versicolor")))
  run <- quietly(tpu_train(flowers, label = "Species", model = "dnn", train.max_steps = 300L,
                           train.batch_size = 16L, train.iterations_per_loop = 100L,
                           train.save_checkpoints_steps = 300L, eval.batch_size = 16L,
                           params.learning_rate = 0.05,
                           model_dir = file.path(work, "model"), runs_dir = file.path(work, "runs"),
                           verbose = FALSE))
  expect_gt(run$metrics$accuracy, 0.8)
  pred <- predict(run, flowers)
  expect_s3_class(pred$class, "factor")
  expect_identical(levels(pred$class), c("virginica", "setosa", "versicolor"))
  probs <- as.matrix(pred[, paste0("prob_", levels(flowers$Species))])
  expect_equal(unname(rowSums(probs)), rep(1, nrow(flowers)), tolerance = 1e-5)
  # each row's class is its most probable one, by name
  expect_identical(as.character(pred$class), levels(flowers$Species)[max.col(probs, ties.method = "first")])
  # and mostly the truth (by hand over the 150 rows, as the eval accuracy is over 30)
  expect_gt(mean(pred$class == flowers$Species), 0.85)
  expect_identical(as.character(pred$class[c(1, 51, 101)]), c("setosa", "versicolor", "virginica"))
})

test_that("bad tables are refused before anything trains, naming the column", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- data.frame(x = c(1, NA, 3, 4, 5, 6), z = c("a", "b", NA, "a", "b", "a"), y = c(1.5, 2, 3, 4, 5, 6.5))
  expect_error(quietly(tpu_train(df, label = "price", model_dir = file.path(work, "a"), verbose = FALSE)),
               "not a column")
  expect_error(quietly(tpu_train(df, label = "y", model_dir = file.path(work, "b"), verbose = FALSE)),
               "x (1 missing, row 2)", fixed = TRUE)
  expect_error(quietly(tpu_train(df, label = "y", missing = list(x = "mean"), model_dir = file.path(work, "c"),
                                 verbose = FALSE)),
               "z (1 missing, row 3)", fixed = TRUE)
  letters_label <- data.frame(x = c(1, 2, 3, 4, 5, 6), z = c("a", "b", "a", "b", "a", "b"))
  expect_error(quietly(tpu_train(letters_label, label = "z", task = "regression",
                                 model_dir = file.path(work, "d"), verbose = FALSE)),
               "regression label must be numeric")
  expect_false(dir.exists(file.path(work, "b", "data")))
})

test_that("docs/tables.md's R examples and examples/R/tables.R run", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  root <- normalizePath(file.path(fixtures_dir(), "..", ".."))  # the repository (tests/fixtures/../..)
  work <- local_work_dir()
  section <- readLines(file.path(root, "docs", "tables.md"))
  opens <- which(section == "```r")
  code <- unlist(lapply(opens, function(i) {
    close <- i + which(section[(i + 1):length(section)] == "```")[1]
    section[(i + 1):(close - 1)]
  }))
  expect_gt(length(code), 3L)
  # every line runs as written, but trains 20 steps, not 500: nothing here asserts what the
  # models learned (test-tables.R's first two tests do, on the same tables)
  shorten <- function(lines) {
    expect_true(any(grepl("train.max_steps = 500L", lines, fixed = TRUE)))
    gsub("train.max_steps = 500L", "train.max_steps = 20L", lines, fixed = TRUE)
  }
  env <- new.env()
  withr::with_dir(work, quietly(eval(parse(text = shorten(code)), envir = env)))
  expect_true(is.numeric(env$run$metrics$rmse))
  expect_s3_class(env$fit, "tpu_run")
  expect_identical(env$fit$global_step, 20L)
  # what the page's comments promise: a numeric `prediction` per row; the class as a factor with
  # iris's levels + prob_<class>, the class being the most probable one (20 steps: what the
  # models learned is asserted by this file's first two tests)
  by_row <- quietly(predict(env$run, env$cars))
  expect_identical(nrow(by_row), nrow(mtcars))
  expect_true(is.numeric(by_row$prediction) && all(is.finite(by_row$prediction)))
  species <- quietly(predict(env$fit, iris[c(1, 51, 101), ]))
  expect_identical(levels(species$class), levels(iris$Species))
  probs <- as.matrix(species[paste0("prob_", levels(iris$Species))])
  expect_equal(unname(rowSums(probs)), rep(1, 3), tolerance = 1e-5)
  expect_identical(as.character(species$class), levels(iris$Species)[max.col(probs, ties.method = "first")])
  example <- file.path(root, "examples", "R", "tables.R")
  example_env <- new.env()
  withr::with_dir(work, quietly(eval(parse(text = shorten(readLines(example))), envir = example_env)))
  expect_s3_class(example_env$fit, "tpu_run")
  expect_true(dir.exists(file.path(work, "models", "table-mpg-linear")))
})

test_that("a training from a data frame does not read back the records it has just written", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  # counts the preflight's reads of data files (tpuestimator.data.scan_files / check_labels)
  reticulate::py_run_string(paste(
    "import tpuestimator.data as _d",
    "_r_reads = []",
    "_r_real = (_d.scan_files, _d.check_labels)",
    "_d.scan_files = lambda *a, **k: _r_reads.append('scan') or _r_real[0](*a, **k)",
    "_d.check_labels = lambda *a, **k: _r_reads.append('labels') or _r_real[1](*a, **k)", sep = "\n"))
  on.exit(reticulate::py_run_string("_d.scan_files, _d.check_labels = _r_real"), add = TRUE)
  run <- quietly(tpu_train(mtcars, label = "mpg", model = "linear", train.max_steps = 3L,
                           train.batch_size = 8L, early_stopping = FALSE, export = FALSE,
                           model_dir = file.path(work, "model"), runs_dir = file.path(work, "runs"),
                           verbose = FALSE))
  expect_identical(as.integer(run$global_step), 3L)
  expect_length(reticulate::py_eval("_r_reads"), 0L)
})
