# tpu_ls_runs() and friends read tfruns-format folders (through the Python core, which R converts).

test_that("ls_runs() returns tfruns's columns, latest first", {
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z", start = 1795000000)
  write_fake_run(runs, "2026-11-29T11-00-00Z", evaluation = list(loss = 0.3, accuracy = 0.9),
                 flags = list(learning_rate = 0.1, model = "mlp"), start = 1795003600)
  dir.create(file.path(runs, "not-a-run"))  # no tfruns.d: ignored
  df <- tpu_ls_runs(runs)
  expect_s3_class(df, "data.frame")
  expect_equal(nrow(df), 2L)
  expect_true(all(c("run_dir", "eval_loss", "eval_accuracy", "metric_loss", "metric_val_loss",
                    "flag_learning_rate", "flag_model", "steps", "steps_completed", "metrics",
                    "script", "start", "end", "completed", "context", "type") %in% names(df)))
  expect_identical(names(df)[1:3], c("run_dir", "eval_loss", "eval_accuracy"))
  expect_identical(basename(df$run_dir), c("2026-11-29T11-00-00Z", "2026-11-29T10-00-00Z"))
  expect_s3_class(df$start, "POSIXct")
  expect_type(df$completed, "logical")
  expect_identical(df$steps_completed, c(3L, 3L))
  expect_equal(df$metric_loss, c(0.5, 0.5))
  expect_equal(df$eval_accuracy, c(0.9, 0.8))
  expect_equal(nrow(tpu_ls_runs(runs, latest_n = 1)), 1L)
  expect_equal(basename(tpu_ls_runs(runs, order = "eval_accuracy", decreasing = FALSE)$run_dir[[1]]),
               "2026-11-29T10-00-00Z")
  expect_equal(nrow(tpu_ls_runs(runs, subset = eval_accuracy > 0.85)), 1L)
  expect_output(print(df), "2 runs")
  expect_error(tpu_ls_runs(runs, order = "eval_nope"), "`order` names columns")
})

test_that("null metric values (steps not run yet) are skipped, an unreadable file is skipped", {
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z", metrics = list(loss = c(1, 0.5, NA), val_loss = c(2, NA, NA)),
                 completed = FALSE)
  bad <- write_fake_run(runs, "2026-11-29T12-00-00Z")
  writeLines("{\"loss\": NaN}", file.path(bad, "tfruns.d", "evaluation.json"))
  expect_warning(df <- tpu_ls_runs(runs), "unreadable run file")
  expect_equal(nrow(df), 2L)
  old <- df[basename(df$run_dir) == "2026-11-29T10-00-00Z", ]
  expect_equal(old$metric_loss, 0.5)
  expect_equal(old$metric_val_loss, 2)
  # tfruns counts the non-null values of the LAST array only (rstudio/tfruns R/ls_runs.R,
  # run_record(): the count is overwritten at each metrics.json key): val_loss has one.
  expect_identical(old$steps_completed, 1L)
  expect_false(old$completed)
})

test_that("an empty or missing runs folder gives zero rows, tpu_latest_run() NULL", {
  expect_equal(nrow(tpu_ls_runs(tempfile())), 0L)
  expect_null(tpu_latest_run(tempfile()))
  expect_output(print(tpu_ls_runs(tempfile())), "No runs")
})

test_that("latest_run() and tpu_run_info() read one run into a tpu_run", {
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z")
  last <- write_fake_run(runs, "2026-11-29T10-00-01Z", evaluation = list(loss = 0.25))
  run <- tpu_latest_run(runs)
  expect_s3_class(run, "tpu_run")
  expect_identical(run$run_dir, last)
  expect_equal(run$metrics$loss, 0.25)
  expect_equal(run$flags$model, "cnn")
  expect_equal(nrow(run$history), 3L)
  expect_true(run$completed)
  expect_output(print(run), "evaluation:  loss 0.2500")
  expect_error(tpu_run_info(tempfile()), "not a run folder")
})

test_that("the tfruns.runs_dir option sets the default runs folder", {
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z")
  withr::local_options(tfruns.runs_dir = runs)
  expect_equal(nrow(tpu_ls_runs()), 1L)
  expect_false(is.null(tpu_latest_run()))
})

test_that("tpu_view_run() and tpu_compare_runs() write self-contained HTML reports (the Python core's)", {
  skip_if_no_tpuestimator()
  runs <- tempfile("runs-")
  a <- write_fake_run(runs, "2026-11-29T10-00-00Z")
  b <- write_fake_run(runs, "2026-11-29T10-00-01Z", flags = list(learning_rate = 0.5, model = "cnn"))
  opened <- NULL
  path <- tpu_view_run(runs_dir = runs, viewer = function(p) opened <<- p)
  expect_identical(opened, path)
  html <- paste(readLines(path), collapse = "\n")
  expect_match(html, "2026-11-29T10-00-01Z")
  expect_match(html, "<svg")
  expect_match(html, "learning_rate")
  cmp <- tpu_compare_runs(runs_dir = runs, viewer = NULL)
  html <- paste(readLines(cmp), collapse = "\n")
  expect_match(html, "Flags (1 differ)", fixed = TRUE)
  expect_match(html, "0.5")
  expect_error(tpu_compare_runs(a, viewer = NULL), "exactly two runs")
  expect_error(tpu_view_run(runs_dir = tempfile(), viewer = NULL), "There are no runs")
  expect_error(tpu_view_run(runs, viewer = NULL), "is not a run folder \\(no tfruns.d/ inside\\)")  # a runs folder
})

test_that("the 'View latest run' addin opens the latest run's report, or says there are no runs", {
  skip_if_no_tpuestimator()
  runs <- tempfile("runs-")
  withr::local_options(tfruns.runs_dir = runs)
  expect_message(expect_null(addin_view_latest_run()), "No runs in")
  write_fake_run(runs, "2026-11-29T10-00-00Z", flags = list(learning_rate = 0.25, model = "cnn"))
  write_fake_run(runs, "2026-11-29T10-00-01Z", flags = list(learning_rate = 0.75, model = "mlp"))
  opened <- NULL
  withr::local_options(browser = function(url) opened <<- url)   # outside RStudio: utils::browseURL
  path <- addin_view_latest_run()
  expect_identical(opened, path)
  html <- paste(readLines(path), collapse = "\n")
  expect_match(html, "2026-11-29T10-00-01Z", fixed = TRUE)
  expect_match(html, "0.75", fixed = TRUE)
  expect_false(grepl("0.25", html, fixed = TRUE))
})

test_that("a selection of tpu_ls_runs() columns prints (no run_dir among them)", {
  runs <- tempfile("runs-")
  write_fake_run(runs, "2026-11-29T10-00-00Z")
  df <- tpu_ls_runs(runs)
  out <- capture.output(print(df[, c("eval_loss", "flag_learning_rate")]))
  expect_true(any(grepl("0.5", out, fixed = TRUE)) && any(grepl("flag_learning_rate", out, fixed = TRUE)))
  expect_true(any(grepl("2026-11-29T10-00-00Z", capture.output(print(df)), fixed = TRUE)))
})
