# Each bad-data fixture (tests/fixtures/bad_data.json) gives its expected DataError from R.

test_that("bad data fixtures give tpuestimator_data_error with the expected message", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  local_work_dir()
  cases <- jsonlite::read_json(fixture_path("bad_data.json"))$cases
  expect_gte(length(cases), 5L)
  for (case in cases) {
    cfg <- bad_data_config(case)
    err <- tryCatch(
      quietly(tpu_train(cfg, verbose = FALSE, runs_dir = "runs", model_dir = file.path("models", case$name))),
      error = function(e) e
    )
    expect_s3_class(err, "tpuestimator_data_error")
    expect_s3_class(err, "tpuestimator_error")
    expect_true(grepl(case$error, conditionMessage(err), fixed = TRUE),
                info = paste0(case$name, ": expected \"", case$error, "\" in: ", conditionMessage(err)))
    if (!is.null(case$record)) expect_identical(as.integer(err$record), as.integer(case$record), info = case$name)
    if (!is.null(case$feature)) expect_identical(err$feature, case$feature, info = case$name)
  }
  # Every one is found before the job writes anything (the up-front scan of each file's head and
  # the label check: python/tpuestimator/jobs/preflight.py): no run and no model dir is left.
  names <- vapply(cases, function(case) case$name, "")
  for (name in names) expect_false(dir.exists(file.path("models", name)), info = name)
  expect_false(dir.exists("runs") && length(list.dirs("runs", recursive = FALSE)) > 0)
})
