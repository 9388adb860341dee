test_that("as_integer accepts whole numbers and names the argument otherwise", {
  expect_identical(tpuestimatorr:::as_integer(100, "steps"), 100L)
  expect_identical(tpuestimatorr:::as_integer(5L, "steps"), 5L)
  expect_error(tpuestimatorr:::as_integer(1.5, "steps"), "`steps` must be a single whole number.*Received: steps = 1.5",
               class = "tpuestimator_argument_error")
  expect_error(tpuestimatorr:::as_integer("a", "port"), "`port`")
  expect_error(tpuestimatorr:::as_integer(c(1, 2), "steps"), "Received: steps = c\\(1, 2\\)")
  expect_null(tpuestimatorr:::as_nullable_integer(NULL, "latest_n"))
  expect_identical(tpuestimatorr:::as_nullable_integer(3, "latest_n"), 3L)
})

test_that("overrides are written as YAML/JSON scalars", {
  ov <- tpuestimatorr:::overrides_from_dots(train.max_steps = 100L, params.learning_rate = 1e-3,
                                              run.strategy = "cpu", export.enabled = FALSE,
                                              train.steps = NULL, "eval.steps=5")
  expect_identical(ov, c("train.max_steps=100", "params.learning_rate=0.001", "run.strategy=\"cpu\"",
                         "export.enabled=false", "train.steps=null", "eval.steps=5"))
  expect_error(tpuestimatorr:::overrides_from_dots(100L), "named override", class = "tpuestimator_argument_error")
  expect_identical(tpuestimatorr:::overrides_from_dots("train.batch_size"), "train.batch_size")  # Python names it
})

test_that("argument errors of the R functions name the argument and the fix", {
  expect_error(tpu_config(42), "`file_or_list` must be")
  expect_error(tpu_config("no/such/config.yaml"), "no such file")
  expect_error(tpu_ls_runs(runs_dir = 1), "`runs_dir` must be a single non-empty string")
  expect_error(tpu_ls_runs(tempfile(), latest_n = "x"), "`latest_n`")
  expect_error(tpu_train(list(model = "cnn"), verbose = "yes"), "`verbose` must be TRUE or FALSE")
  expect_error(install_tpuestimator(extra = "cuda"), "`extra` must be NULL or some of")
})
