# tpu_tuning_run() (issue 12): every combination is a separate training with its own model dir,
# and the R console stays free of TensorFlow's logs (tests/fixtures/parity: a linear model).

test_that("a tuning run of 3 learning rates gives 3 different trained runs", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  out <- capture.output(
    msgs <- capture.output(
      runs <- tpu_tuning_run(fixture_path("parity", "parity.yaml"),
                             flags = list(params.learning_rate = c(0.001, 0.03, 0.3)),
                             sample = 1, runs_dir = "runs", verbose = TRUE, train.max_steps = 10, export = FALSE),
      type = "message"),
    type = "output")
  expect_s3_class(runs, "tpu_runs_df")
  expect_equal(nrow(runs), 3L)
  expect_setequal(runs$flag_learning_rate, c(0.001, 0.03, 0.3))
  expect_equal(length(unique(round(runs$eval_loss, 6))), 3L)     # three trainings, three results
  expect_true(all(runs$global_step == 10L))                       # each from scratch
  expect_equal(length(unique(runs$model_dir)), 3L)
  expect_false("resumed_from_step" %in% names(runs))
  expect_false(is.unsorted(runs$eval_loss))                       # best first
  expect_true(any(grepl("tuning run 3/3: params.learning_rate=0.3", msgs, fixed = TRUE)))
  # issue 12.6: no retracing warnings or C++ log lines in the console
  console <- c(out, msgs)
  expect_false(any(grepl("retracing|absl::InitializeLog|oneDNN|I0000", console)),
               info = paste(console, collapse = "\n"))
})

test_that("a rerun with another learning rate into the same model dir is refused, resume = TRUE continues", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  work <- local_work_dir()
  cfg <- fixture_path("parity", "parity.yaml")
  quietly(tpu_train(cfg, model_dir = "m", runs_dir = "runs", verbose = FALSE, train.max_steps = 10, export = FALSE))
  expect_error(quietly(tpu_train(cfg, model_dir = "m", runs_dir = "runs", verbose = FALSE, train.max_steps = 10,
                                 params.learning_rate = 0.01, export = FALSE)),
               "params.learning_rate: 0.1 -> 0.01")
  run <- quietly(tpu_train(cfg, model_dir = "m", runs_dir = "runs", verbose = FALSE, train.max_steps = 20,
                           params.learning_rate = 0.01, export = FALSE, resume = TRUE))
  expect_equal(run$global_step, 20L)
  expect_equal(as.integer(tpu_run_info(run$run_dir)$properties$resumed_from_step), 10L)
})
