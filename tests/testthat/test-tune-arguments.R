# tpu_tuning_run()'s argument checks, apart from test-tune.R's trainings: the quick tier
# (tests/quick_testthat.txt) runs this file.

test_that("tpu_tuning_run() checks its arguments", {
  expect_error(tpu_tuning_run("x.yaml", flags = list()), "`flags`")
  expect_error(tpu_tuning_run("x.yaml", flags = list(a = numeric())), "no values")
  expect_error(tpu_tuning_run("x.yaml", flags = list(a = 1), sample = 2), "`sample`")
})
