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
  # Errors the job finds before writing anything (a pattern matching no file, a label out of
  # range: python/tpuestimator/preflight.py) leave no run and no model dir; the others leave
  # failed runs that are still valid, listable runs with the error recorded.
  up_front <- c("no_files", "mislabelled")
  names <- vapply(cases, function(case) case$name, "")
  expect_true(all(up_front %in% names))
  for (name in up_front) expect_false(dir.exists(file.path("models", name)), info = name)
  runs <- tpu_ls_runs("runs")
  expect_equal(nrow(runs), length(setdiff(names, up_front)))
  expect_false(any(runs$completed))
  expect_true(all(nzchar(runs$error_message)))
  for (d in runs$run_dir) expect_tfruns_run(d)
})
