# The run reader (tpu_ls_runs(), tpu_run_info(), tpu_latest_run(), run status: R/runs.R converting
# the core's tpuestimator.runs.frames) against expectations written by hand from the files of the
# fixture runs folder (issue 24.8). test-parity.R checks the bridge, test-runs-columns.R the
# columns shared with Python's reader; here the values themselves are checked.

utc <- function(seconds) as.POSIXct(seconds, origin = "1970-01-01", tz = "UTC")

test_that("tpu_ls_runs() reads each fixture run's values and types from its files", {
  runs <- fixture_path("runs", "runs")
  skip_if_not(dir.exists(runs), "tests/fixtures/runs not found")
  df <- tpu_ls_runs(runs, order = "run_dir", decreasing = FALSE)
  expect_s3_class(df, "tpu_runs_df")
  expect_identical(basename(df$run_dir), c("2026-11-29T10-00-00Z", "2026-11-29T10-01-00Z", "2026-11-29T10-02-00Z",
                                           "2026-11-29T10-03-00Z", "2026-11-29T10-04-00Z", "2026-11-29T10-05-00Z"))
  expect_identical(df$status, c("completed", "failed", "failed", "interrupted", "completed", "completed"))
  expect_identical(df$completed, c(TRUE, FALSE, FALSE, FALSE, TRUE, TRUE))

  ours <- df[1, ]  # a completed run of ours: evaluation.json, metrics.json (3 rows), flags, properties
  expect_identical(ours$eval_loss, 0.4)
  expect_identical(ours$eval_accuracy, 0.65)
  expect_identical(ours$metric_loss, 0.3333333333333333)   # the last value of each array
  expect_identical(ours$metric_accuracy, 0.7)
  expect_identical(ours$metric_val_accuracy, 0.65)
  expect_false("metric_epoch" %in% names(df))             # the x axis is not a metric
  expect_identical(ours$flag_model, "cnn")
  expect_identical(ours$flag_learning_rate, 0.01)
  expect_identical(ours$`flag_optimizer.name`, "adam")
  expect_identical(ours$`flag_train.max_steps`, 300L)
  expect_identical(ours$batch_size, 32L)
  expect_identical(ours$epochs, 3L)
  expect_identical(ours$epochs_completed, 3L)
  expect_identical(ours$global_step, 300L)
  expect_identical(ours$num_replicas, 1L)
  expect_identical(ours$learning_rate, 0.01)
  expect_identical(ours$start, utc(1795947818))
  expect_identical(ours$end, utc(1795947860.5))
  expect_identical(ours$script, "digits.yaml")
  expect_identical(ours$stopped_early, "FALSE")           # not a tfruns property: kept as text
  expect_identical(ours$model_dir, "models/digits")
  expect_identical(ours$metrics, file.path(runs, "2026-11-29T10-00-00Z", "tfruns.d", "metrics.json"))
  expect_identical(ours$source_code, file.path(runs, "2026-11-29T10-00-00Z", "tfruns.d", "source.tar.gz"))
  expect_true(is.na(ours$error_message))

  nan <- df[3, ]  # stopped by a NaN loss: error.json, null metrics
  expect_identical(nan$error_message, "FloatingPointError: loss became NaN at step 100")
  expect_match(nan$error_traceback, "raise FloatingPointError", fixed = TRUE)
  expect_identical(nan$metric_accuracy, 0.1)              # the only non-null value
  expect_true(is.na(nan$metric_loss))                     # all null: NA, not an error
  expect_identical(nan$epochs_completed, 0L)              # tfruns counts the LAST array: val_loss, all null
  expect_identical(nan$nonfinite_report, "debug/nonfinite-100")
  expect_identical(nan$learning_rate, 10)

  killed <- df[4, ]  # killed: no completed=TRUE, no error.json, its owner process is gone
  expect_identical(killed$resumed_from_step, 0L)
  expect_identical(killed$global_step, 100L)

  keras <- df[5, ]  # written by R's tfruns + keras: their names and types
  expect_identical(keras$eval_acc, 0.94)
  expect_identical(keras$metric_val_acc, 0.94)
  expect_identical(keras$flag_units, 128L)
  expect_identical(keras$flag_dropout1, 0.4)
  expect_identical(keras$samples, 60000L)
  expect_identical(keras$validation_samples, 10000L)
  expect_identical(keras$optimizer, "RMSprop")
  expect_identical(keras$output, "Epoch 1/2\nEpoch 2/2")
  expect_identical(keras$epochs_completed, 2L)

  old <- df[6, ]  # the format before issue 12: a 'step' array and a 'steps' property
  expect_identical(old$metric_step, 300)
  expect_identical(old$steps, 300L)
  expect_identical(old$steps_completed, 1L)
})

test_that("tpu_ls_runs() orders, subsets and keeps the latest runs as asked", {
  runs <- fixture_path("runs", "runs")
  skip_if_not(dir.exists(runs), "tests/fixtures/runs not found")
  best <- tpu_ls_runs(runs, order = "eval_loss", decreasing = FALSE)
  expect_identical(basename(best$run_dir[1:3]), c("2026-11-29T10-04-00Z", "2026-11-29T10-00-00Z",
                                                  "2026-11-29T10-05-00Z"))
  expect_true(all(is.na(best$eval_loss[4:6])))             # runs without an evaluation last
  expect_identical(basename(tpu_ls_runs(runs, latest_n = 2)$run_dir), c("2026-11-29T10-05-00Z", "2026-11-29T10-04-00Z"))
  done <- tpu_ls_runs(runs, subset = status == "failed", order = "run_dir", decreasing = FALSE)
  expect_identical(basename(done$run_dir), c("2026-11-29T10-01-00Z", "2026-11-29T10-02-00Z"))
  expect_identical(nrow(tpu_ls_runs(tempfile())), 0L)
  expect_error(tpu_ls_runs(runs, order = "no_such_column"), "no_such_column")
})

test_that("run_info() and tpu_latest_run() read one run: history, flags, times, error", {
  runs <- fixture_path("runs", "runs")
  skip_if_not(dir.exists(runs), "tests/fixtures/runs not found")
  run <- tpu_run_info(file.path(runs, "2026-11-29T10-00-00Z"))
  expect_s3_class(run, "tpu_run")
  expect_identical(basename(run$run_dir), "2026-11-29T10-00-00Z")
  expect_identical(run$global_step, 300L)
  expect_identical(run$completed, TRUE)
  expect_identical(run$start, utc(1795947818))
  expect_identical(run$end, utc(1795947860.5))
  expect_identical(run$metrics, list(loss = 0.4, accuracy = 0.65))
  expect_identical(run$flags[["train.max_steps"]], 300L)
  expect_identical(run$flags$model, "cnn")
  expect_identical(names(run$history), c("epoch", "loss", "accuracy", "val_loss", "val_accuracy"))
  expect_identical(run$history$epoch, c(100L, 200L, 300L))
  expect_identical(run$history$val_accuracy, c(0.45, 0.55, 0.65))
  expect_identical(run$model_dir, "models/digits")        # not on this machine: kept as written
  expect_null(run$error)

  failed <- tpu_run_info(file.path(runs, "2026-11-29T10-02-00Z"))
  expect_identical(failed$completed, FALSE)
  expect_identical(failed$error$message, "FloatingPointError: loss became NaN at step 100")
  expect_identical(failed$history$loss, c(NA, NA, NA))
  expect_identical(failed$history$accuracy, c(0.1, NA, NA))

  expect_identical(basename(tpu_latest_run(runs)$run_dir), "2026-11-29T10-05-00Z")
  expect_null(tpu_latest_run(tempfile()))
  expect_error(tpu_run_info(tempfile()), "not a run folder")
})

test_that("a run is 'running' only while its owner process lives on this host", {
  runs <- tempfile("runs-")
  run <- file.path(runs, "2026-11-29T11-00-00Z")
  dir.create(file.path(run, "tfruns.d", "properties"), recursive = TRUE)
  on.exit(unlink(runs, recursive = TRUE), add = TRUE)
  # started now: after this R process, so its pid is the owner's (not a reused one)
  writeLines(sprintf("%.3f", as.numeric(Sys.time())), file.path(run, "tfruns.d", "properties", "start"))
  writeLines("FALSE", file.path(run, "tfruns.d", "properties", "completed"))
  owner <- file.path(run, "tfruns.d", "owner.json")
  write_owner <- function(pid, host) writeLines(sprintf('{"pid": %d, "host": "%s"}', pid, host), owner)

  write_owner(Sys.getpid(), Sys.info()[["nodename"]])       # this R process: alive, here
  expect_identical(tpu_ls_runs(runs)$status, "running")
  write_owner(Sys.getpid(), "another-host")                  # a pid on another host means nothing here
  expect_identical(tpu_ls_runs(runs)$status, "interrupted")
  write_owner(999999999L, Sys.info()[["nodename"]])          # gone
  expect_identical(tpu_ls_runs(runs)$status, "interrupted")
  writeLines("a signal", file.path(run, "tfruns.d", "properties", "interrupted"))
  write_owner(Sys.getpid(), Sys.info()[["nodename"]])        # marked interrupted: whatever the owner
  expect_identical(tpu_ls_runs(runs)$status, "interrupted")
  writeLines('{"message": "boom", "traceback": []}', file.path(run, "tfruns.d", "error.json"))
  expect_identical(tpu_ls_runs(runs)$status, "failed")
  writeLines("TRUE", file.path(run, "tfruns.d", "properties", "completed"))
  expect_identical(tpu_ls_runs(runs)$status, "completed")
  expect_identical(tpu_ls_runs(runs)$error_message, "boom")
})

test_that("a run whose owner pid now belongs to a later process is interrupted, as in Python", {
  runs <- tempfile("runs-")
  run <- file.path(runs, "2026-11-29T11-00-00Z")
  dir.create(file.path(run, "tfruns.d", "properties"), recursive = TRUE)
  on.exit(unlink(runs, recursive = TRUE), add = TRUE)
  # the run started a day before this R process: the pid this R process holds was reused
  writeLines(sprintf("%.3f", as.numeric(Sys.time()) - 86400 - as.numeric(proc.time()[["elapsed"]])),
             file.path(run, "tfruns.d", "properties", "start"))
  writeLines("FALSE", file.path(run, "tfruns.d", "properties", "completed"))
  writeLines(sprintf('{"pid": %d, "host": "%s"}', Sys.getpid(), Sys.info()[["nodename"]]),
             file.path(run, "tfruns.d", "owner.json"))
  expect_identical(tpu_ls_runs(runs)$status, "interrupted")
})
