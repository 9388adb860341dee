# tpu_train(cfg, cluster = ...): a local cluster of `tpuestimator train` processes, one TF_CONFIG
# each (the same Python function as `tpuestimator cluster`).

test_that("the cluster argument is checked before anything starts", {
  cfg <- list(model = "linear")
  expect_error(tpu_train(cfg, cluster = 2L), "`cluster` must be NULL or a named list with `workers`",
               class = "tpuestimator_argument_error")
  expect_error(tpu_train(cfg, cluster = list(ps = 1L)), "`cluster` must be", class = "tpuestimator_argument_error")
  expect_error(tpu_train(cfg, cluster = list(workers = 2L, gpus = 1L)), "`evaluator`, `restarts`")
  expect_error(tpu_train(cfg, cluster = list(workers = 1.5)), "`cluster\\$workers` must be a single whole number")
  expect_error(tpu_train(cfg, cluster = list(workers = 0L)), "`cluster\\$workers` must be at least 1")
  expect_error(tpu_train(cfg, cluster = list(workers = 2L, ps = -1L)), "`cluster\\$ps` must be 0 or more")
  expect_error(tpu_train(cfg, cluster = list(workers = 2L, evaluator = "yes")),
               "`cluster\\$evaluator` must be TRUE or FALSE")
  expect_error(tpu_train(cfg, cluster = list(workers = 2L, restarts = -2L)), "`cluster\\$restarts` must be 0 or more")
  expect_error(tpu_train(cfg, model_fn = function(params) NULL, cluster = list(workers = 2L)),
               "`model_fn` must be NULL or a model name with `cluster`")
  expect_error(tpu_train(cfg, hooks = function(event, info) NULL, cluster = list(workers = 2L)),
               "`hooks` must be NULL with `cluster`")
  expect_error(tpu_train(cfg, progress = function(event, info) NULL, cluster = list(workers = 2L)),
               "`progress` must be NULL with `cluster`")
})

test_that("a config whose run.strategy is not multi_worker is refused before any process starts", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  err <- expect_error(quietly(tpu_train(fixture_path("parity", "parity.yaml"), cluster = list(workers = 2L),
                                        run.strategy = "cpu", verbose = FALSE)),
                      class = "tpuestimator_config_error")
  expect_match(conditionMessage(err), "run.strategy.*multi_worker")
})

test_that("two workers train the parity job from R and the chief's run comes back", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  out <- withr::local_tempdir()
  local_forked_python()  # each task a real process, forked from one that imported TensorFlow
  counts <- local_config_counts()  # this session's, the launcher's: the tasks validate in their own processes
  run <- quietly(tpu_train(fixture_path("parity", "parity.yaml"), cluster = list(workers = 2L),
                           run.strategy = "multi_worker", flags = list(max_steps = 20L, learning_rate = 0.2),
                           verbose = FALSE, model_dir = file.path(out, "model"), runs_dir = file.path(out, "runs")))
  expect_equal(counts()$validate, 1L)  # the flags mapped and validated with the config once, before any task
  expect_s3_class(run, "tpu_run")
  expect_identical(run$global_step, 20L)
  expect_equal(run$config$params$learning_rate, 0.2)
  expect_identical(as.integer(run$metrics$num_examples), 24L)  # the parity eval split, each example once
  expect_true(file.exists(file.path(run$model_dir, "ckpt-20.index")))
  expect_identical(nrow(tpu_ls_runs(file.path(out, "runs"))), 1L)  # one run record: the chief's
})

test_that("a parameter-server cluster needs run.strategy: parameter_server, checked before any process starts", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  err <- expect_error(quietly(tpu_train(fixture_path("parity", "parity.yaml"), cluster = list(workers = 2L, ps = 1L),
                                        run.strategy = "multi_worker", verbose = FALSE)),
                      class = "tpuestimator_config_error")
  expect_match(conditionMessage(err), "parameter_server with --ps")
})

test_that("two workers and a parameter server train the parity job from R (asynchronously)", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  out <- withr::local_tempdir()
  local_forked_python()  # each task a real process, forked from one that imported TensorFlow
  run <- quietly(tpu_train(fixture_path("parity", "parity.yaml"), cluster = list(workers = 2, ps = 1),
                           run.strategy = "parameter_server", train.max_steps = 20L,
                           run.ps_steps_per_invocation = 5L, verbose = FALSE,
                           model_dir = file.path(out, "model"), runs_dir = file.path(out, "runs")))
  expect_s3_class(run, "tpu_run")
  expect_identical(run$global_step, 20L)  # both workers' steps, counted by the chief
  expect_identical(as.integer(run$metrics$num_examples), 24L)  # evaluated once, on the chief
  expect_true(file.exists(file.path(run$model_dir, "ckpt-20.index")))
  runs <- tpu_ls_runs(file.path(out, "runs"))
  expect_identical(nrow(runs), 1L)
})
