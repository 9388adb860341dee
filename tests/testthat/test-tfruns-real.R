# Issue 22.2/22.5/22.6 against the real tfruns: the example scripts of inst/examples/tfruns
# (docs/tuning.md, "Tuning with tfruns") under training_run() and tuning_run(), their flags
# reaching tpu_train(), and tfruns's own ls_runs(), save_run_view() and save_run_comparison()
# reading the runs without a warning.

test_that("training_run() and tuning_run() of the example scripts: flags apply, tfruns reads every run", {
  skip_if_no_tpuestimator()
  local_real_tfruns()
  work <- local_work_dir()
  withr::local_envvar(R_USER_CACHE_DIR = file.path(work, ".cache"))  # tpu_example()'s folder
  scripts <- system.file("examples", "tfruns", package = "tpuestimatorr")
  file.copy(list.files(scripts, full.names = TRUE), work)
  withr::local_options(tpuestimatorr.verbose = FALSE)

  quietly(tfruns::training_run("train.R", flags = list(max_steps = 10), echo = FALSE, view = FALSE))
  tuned <- quietly(tfruns::tuning_run("train.R", flags = list(learning_rate = c(0.001, 0.05), max_steps = 10),
                                      confirm = FALSE, echo = FALSE))
  expect_equal(nrow(tuned), 2L)
  quietly(tfruns::training_run("train_explicit_flags.R", flags = list(max_steps = 10, note = "x"),
                               echo = FALSE, view = FALSE))

  listed <- with_warnings(tfruns::ls_runs())
  expect_identical(listed$warnings, character())
  runs <- listed$value
  expect_equal(nrow(runs), 4L)
  expect_true(all(c("run_dir", "eval_loss", "eval_accuracy", "metric_loss", "metric_val_loss",
                    "flag_learning_rate", "flag_max_steps", "epochs", "epochs_completed", "completed",
                    "learning_rate", "script") %in% names(runs)))
  expect_true(all(runs$completed))
  expect_identical(runs$epochs_completed, runs$epochs)  # finished runs read complete
  expect_true(all(runs$epochs >= 1L))
  for (dir in runs$run_dir) {
    props <- file.path(dir, "tfruns.d", "properties")
    # the flags reached the configuration: 10 steps, and the run's own learning rate
    expect_identical(readLines(file.path(props, "global_step")), "10")
    flags <- jsonlite::read_json(file.path(dir, "tfruns.d", "flags.json"))
    expect_equal(as.numeric(readLines(file.path(props, "learning_rate"))), flags$learning_rate)
    metrics <- jsonlite::read_json(file.path(dir, "tfruns.d", "metrics.json"), simplifyVector = TRUE)
    expect_true(all(!is.na(metrics$loss)))  # a training curve, evaluations in their loop's row
    expect_equal(sum(!is.na(metrics$val_loss)), 1L)
  }
  tuned_runs <- runs[runs$run_dir %in% tuned$run_dir, ]
  expect_setequal(tuned_runs$flag_learning_rate, c(0.001, 0.05))
  expect_false(isTRUE(all.equal(tuned_runs$eval_loss[[1]], tuned_runs$eval_loss[[2]])))  # two models
  explicit <- runs[runs$script == "train_explicit_flags.R", ]
  expect_equal(nrow(explicit), 1L)
  expect_identical(explicit$flag_note, "x")

  view <- with_warnings(tfruns::save_run_view(runs$run_dir[[1]], file.path(work, "view.html")))
  expect_identical(view$warnings, character())
  comparison <- with_warnings(tfruns::save_run_comparison(tuned_runs, file.path(work, "compare.html")))
  expect_identical(comparison$warnings, character())
  expect_gt(file.size(file.path(work, "view.html")), 10000)
  expect_gt(file.size(file.path(work, "compare.html")), 10000)
  # our own reader agrees
  expect_equal(nrow(tpu_ls_runs()), 4L)
})

test_that("a flag that names no configuration field stops tpu_train() with the fields listed", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  err <- expect_error(tpu_train(fixture_path("parity", "parity.yaml"), verbose = FALSE,
                                flags = list(learning_rat = 0.1, max_steps = 5L)),
                      class = "tpuestimator_config_error")
  expect_match(conditionMessage(err), "learning_rat=0.1", fixed = TRUE)
  expect_match(conditionMessage(err), "params.learning_rate", fixed = TRUE)
  expect_match(conditionMessage(err), "train.max_steps", fixed = TRUE)
  expect_false(dir.exists(file.path(work, "runs")))  # nothing trained or recorded
  expect_error(tpu_train(fixture_path("parity", "parity.yaml"), flags = list(1, 2)), "`flags`")
})

test_that("tpu_train(path, flags =) validates the config once and resolves its data section once", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  counts <- local_config_counts()  # the core's own validator and resolver, counted
  run <- tpu_train(fixture_path("parity", "parity.yaml"), flags = list(max_steps = 10L, learning_rate = 0.2),
                   eval.every_n_steps = 10L, model_dir = file.path(work, "m"), runs_dir = file.path(work, "runs"),
                   verbose = FALSE)
  expect_equal(counts(), list(resolve = 1L, validate = 1L))
  expect_equal(run$global_step, 10L)
  expect_equal(run$config$params$learning_rate, 0.2)
})
