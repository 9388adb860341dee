# Issue 34 items 5, 6, 7, 11: formulas read as stats::terms() reads them; tpu_tuning_run() on a
# formula; table runs recorded in runs/ of the working folder (where tpu_ls_runs() and
# tfruns::ls_runs() look); missing values reported for every column at once, in R syntax,
# with R's row numbers.

tiny_line <- function(n = 40L) {
  x <- seq_len(n) / n
  data.frame(x = x, z = rev(x), y = 2 * x + 1)
}

tiny_steps <- c(tiny_steps, list(verbose = FALSE))  # helper-utils.R's few steps, quietly

test_that("a formula's terms are the columns model.frame() reads: dot expands, minus drops, log(x) and a:b computed", {
  cars <- mtcars
  dropped <- table_from_formula(mpg ~ . - carb, cars)
  expect_identical(dropped$label, "mpg")
  expect_identical(setdiff(names(dropped$data), "mpg"), attr(stats::terms(mpg ~ . - carb, data = cars), "term.labels"))
  expect_false("carb" %in% names(dropped$data))

  f <- mpg ~ log(hp) + I(wt^2) + wt:disp
  expect_message(table_from_formula(mpg ~ log(hp), cars), "`log(hp)` is computed in R as the column `log_hp`",
                 fixed = TRUE)
  table <- suppressMessages(table_from_formula(f, cars))
  frame <- stats::model.frame(f, cars)
  design <- stats::model.matrix(f, cars)
  expect_identical(names(table$data), c("log_hp", "I_wt_2", "wt_x_disp", "mpg"))
  expect_equal(table$data$log_hp, frame[["log(hp)"]])
  expect_equal(table$data$I_wt_2, as.numeric(frame[["I(wt^2)"]]))
  expect_equal(table$data$wt_x_disp, unname(design[, "wt:disp"]))  # numbers: lm's product column
  expect_identical(vapply(table$transforms, `[[`, "", "name"), c("log_hp", "I_wt_2", "wt_x_disp"))
  # predict() computes them again from the columns
  again <- apply_table_transforms(cars[1:3, c("hp", "wt", "disp")], table$transforms, table$env)
  expect_equal(again$log_hp, log(cars$hp[1:3]))

  cars$cyl <- factor(cars$cyl)
  cars$gear <- factor(cars$gear)
  crossed <- table_from_formula(mpg ~ cyl:gear, cars)
  expect_identical(names(crossed$data), c("cyl", "gear", "mpg"))
  expect_identical(crossed$feature_columns$cyl_x_gear$type, "crossed")
  expect_identical(unlist(crossed$feature_columns$cyl_x_gear$columns), c("cyl", "gear"))

  expect_error(table_from_formula(log(mpg) ~ ., cars), "left side is `log(mpg)`", fixed = TRUE)
  expect_error(table_from_formula(mpg ~ cyl:wt, cars), "crosses a category with a number")
  expect_error(table_from_formula(mpg ~ poly(wt, 2), cars), "gives a matrix")
  expect_error(table_from_formula(mpg ~ weight, cars), "not in `data`: weight")
})

test_that("a table run is recorded in runs/ of the working folder; formula columns reach the model and predict()", {
  skip_if_no_tpuestimator()
  local_real_tfruns()
  work <- local_work_dir()
  cars <- mtcars[, c("mpg", "hp", "wt", "carb")]
  run <- quietly(do.call(tpu_train, c(list(mpg ~ . - carb + log(hp), data = cars, model = "linear",
                                           model_dir = file.path(work, "m")), tiny_steps)))
  expect_identical(dirname(run$run_dir), file.path(work, "runs"))   # not models/table-mpg/runs
  expect_identical(normalizePath(tpu_ls_runs()$run_dir), run$run_dir)
  listed <- with_warnings(tfruns::ls_runs())
  expect_identical(listed$warnings, character())
  expect_identical(normalizePath(listed$value$run_dir), run$run_dir)
  manifest <- jsonlite::read_json(file.path(work, "m", "data", "manifest.json"))
  expect_setequal(names(manifest$feature_columns), c("hp", "wt", "log_hp"))   # no carb
  # predict() on the run computes log_hp = log(hp); the export itself takes log_hp
  by_run <- predict(run, cars[1:4, ])
  by_export <- tpu_predict(run$export_dir, transform(cars[1:4, ], log_hp = log(hp)))
  expect_equal(by_run$prediction, by_export$prediction, tolerance = 1e-6)
  wrong <- tpu_predict(run$export_dir, transform(cars[1:4, ], log_hp = hp))
  expect_false(isTRUE(all.equal(by_run$prediction, wrong$prediction)))
  expect_error(predict(run, cars[1:2, c("wt", "carb")]), "cannot give the column `log_hp`")
})

test_that("tpu_tuning_run() takes a formula: one model per combination, listed by tfruns", {
  skip_if_no_tpuestimator()
  local_real_tfruns()
  work <- local_work_dir()
  # export = FALSE: what is compared are the runs' records, not exports
  runs <- quietly(do.call(tpu_tuning_run, c(list(y ~ x + z, data = tiny_line(), model = "linear", export = FALSE,
                                                 flags = list(learning_rate = c(0.01, 0.3))), tiny_steps)))
  expect_equal(nrow(runs), 2L)
  expect_setequal(runs$flag_learning_rate, c(0.01, 0.3))
  expect_length(unique(runs$model_dir), 2L)
  expect_true(all(dirname(runs$run_dir) == file.path(work, "runs")))
  listed <- with_warnings(tfruns::ls_runs())
  expect_identical(listed$warnings, character())
  expect_setequal(listed$value$flag_learning_rate, c(0.01, 0.3))
  expect_false(isTRUE(all.equal(listed$value$eval_loss[[1]], listed$value$eval_loss[[2]])))  # two models
  comparison <- with_warnings(tfruns::save_run_comparison(listed$value, file.path(work, "compare.html")))
  expect_identical(comparison$warnings, character())
  expect_gt(file.size(file.path(work, "compare.html")), 10000)
  expect_error(tpu_tuning_run(y ~ x, data = tiny_line(), flags = list(learning_rat = 0.1), verbose = FALSE),
               "learning_rat")
})

test_that("missing values: every column and its count in one error, R syntax, R's row numbers, the fix works", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  df <- tiny_line()
  df$x[c(2, 7)] <- NA
  df$home <- rep(c("own", "rent"), 20)
  df$home[3] <- NA
  df$debt <- df$z
  df$debt[40] <- NA
  err <- expect_error(quietly(do.call(tpu_train, c(list(df, label = "y", model_dir = file.path(work, "a")),
                                                   tiny_steps))), class = "tpuestimator_data_error")
  msg <- conditionMessage(err)
  counts <- colSums(is.na(df))
  for (col in names(counts)[counts > 0]) {
    rows <- which(is.na(df[[col]]))   # R's row numbers
    expect_match(msg, paste0(col, " (", counts[[col]], " missing, row", if (length(rows) > 1) "s", " ",
                             paste(rows, collapse = ", "), ")"), fixed = TRUE)
  }
  expect_match(msg, 'missing = "mean"', fixed = TRUE)
  expect_match(msg, "category, character or logical column the out-of-vocabulary bucket", fixed = TRUE)
  expect_false(grepl("{", msg, fixed = TRUE))   # no Python dict
  expect_false(dir.exists(file.path(work, "a", "data")))
  # the per-column fix, as written in the message, is R that trains in one try
  fix <- regmatches(msg, regexpr("missing = list\\([^)]*\\)", msg))
  expect_identical(fix, 'missing = list(x = "mean", home = "oov", debt = "mean")')
  missing <- eval(str2lang(sub("^missing = ", "", fix)))
  run <- quietly(do.call(tpu_train, c(list(df, label = "y", model_dir = file.path(work, "b"), missing = missing,
                                           model = "linear"), tiny_steps)))
  # predict(): z had no missing value in training (no policy): rows numbered as R does
  newdata <- df[1:6, ]
  newdata$z[c(2, 5)] <- NA
  err <- expect_error(predict(run, newdata), class = "tpuestimator_data_error")
  expect_match(conditionMessage(err), "z (2 missing, rows 2, 5)", fixed = TRUE)
  expect_match(conditionMessage(err), 'missing = list(z = "mean")', fixed = TRUE)
})
