# One reader of run records (issue 12.7): R's tpu_ls_runs() gives exactly the columns, names, types and
# order that tests/fixtures/runs/expected_columns.json records and that Python's tpu_ls_runs() gives
# (tests/python/test_runs_columns.py checks the same file). The fixture runs folder holds
# completed, failed, NaN-stopped, killed, R-written and old-format runs (make_runs.py).

test_that("R's tpu_ls_runs() has Python's columns, names, types and order on the shared runs", {
  folder <- fixture_path("runs")
  skip_if_not(dir.exists(folder), "tests/fixtures/runs not found")
  expected <- jsonlite::read_json(file.path(folder, "expected_columns.json"))
  old <- setwd(folder)
  on.exit(setwd(old), add = TRUE)
  df <- expect_silent(tpu_ls_runs("runs", order = "run_dir"))  # issue 12.3: no warning on any read
  types <- run_column_types(df)
  expect_identical(names(types), vapply(expected$columns, `[[`, "", 1L))
  expect_identical(unname(types), vapply(expected$columns, `[[`, "", 2L))
  expect_identical(basename(df$run_dir), vapply(expected$runs, `[[`, "", "run"))
  expect_identical(df$status, vapply(expected$runs, `[[`, "", "status"))
  # and the values that matter for picking the best run agree
  best <- tpu_ls_runs("runs", order = "eval_loss", decreasing = FALSE)
  expect_identical(basename(best$run_dir[[1]]), "2026-11-29T10-04-00Z")
  expect_equal(df$epochs_completed[basename(df$run_dir) == "2026-11-29T10-00-00Z"], 3L)
  expect_equal(df$epochs[basename(df$run_dir) == "2026-11-29T10-00-00Z"], 3L)
  expect_equal(df$metric_accuracy[basename(df$run_dir) == "2026-11-29T10-00-00Z"], 0.7)
})

test_that("property files end with a newline and source archives untar without warnings", {
  folder <- fixture_path("runs", "runs")
  skip_if_not(dir.exists(folder), "tests/fixtures/runs not found")
  for (run in list.dirs(folder, recursive = FALSE)) {
    props <- list.files(file.path(run, "tfruns.d", "properties"), full.names = TRUE)
    for (p in props) expect_silent(readLines(p))  # issue 12.3: "incomplete final line"
    archive <- file.path(run, "tfruns.d", "source.tar.gz")
    if (file.exists(archive)) {
      out <- tempfile()
      expect_silent(utils::untar(archive, exdir = out))  # issue 12.3: "using pax extended headers"
      expect_true(length(list.files(file.path(out, "source"))) >= 1L)
    }
  }
})

test_that("view_run() shows the console output from properties/output (where tfruns reads it)", {
  folder <- fixture_path("runs", "runs")
  skip_if_not(dir.exists(folder), "tests/fixtures/runs not found")
  path <- tpu_view_run(file.path(folder, "2026-11-29T10-04-00Z"), viewer = function(p) NULL,
                   output = tempfile(fileext = ".html"))
  html <- paste(readLines(path), collapse = "\n")
  expect_match(html, "<h2>Output</h2>", fixed = TRUE)
  expect_match(html, "Epoch 2/2", fixed = TRUE)
})

test_that("progress, columns and charts follow tfruns's own rules (helper-tfruns-rules.R)", {
  folder <- fixture_path("runs")
  skip_if_not(dir.exists(folder), "tests/fixtures/runs not found")
  old <- setwd(folder)
  on.exit(setwd(old), add = TRUE)
  df <- tpu_ls_runs("runs", order = "run_dir")
  expect_false("metric_epoch" %in% names(df))  # tfruns skips the x axis when it makes metric_ columns
  standard <- intersect(names(df), tfruns_rule_standard_columns)
  expect_identical(standard, intersect(tfruns_rule_standard_columns, names(df)))  # tfruns's order
  for (i in seq_len(nrow(df))) {
    rule <- tfruns_rule_progress(df$run_dir[[i]])
    expect_identical(df[[rule$column]][[i]], rule$completed, info = df$run_dir[[i]])
  }
  # a finished run of ours: tfruns shows "Epochs 3" (3 of 3 evaluations), not "1/300"
  ours <- file.path("runs", "2026-11-29T10-00-00Z")
  expect_identical(tfruns_rule_progress(ours)$shown, "3")
  expect_identical(tfruns_rule_progress(ours)$unit, "epochs")
  metrics <- jsonlite::read_json(file.path(ours, "tfruns.d", "metrics.json"), simplifyVector = TRUE)
  expect_identical(tfruns_rule_charts(metrics),
                   list(loss = c("loss", "val_loss"), accuracy = c("accuracy", "val_accuracy")))
  expect_identical(metrics$epoch, c(100L, 200L, 300L))  # x axis: the global step of each row
  # tfruns's chart takes the last `epoch` value as the x axis maximum and the values as ticks:
  # in our unfinished runs too, the rows not recorded carry their planned step, never null
  for (run in file.path("runs", c("2026-11-29T10-01-00Z", "2026-11-29T10-02-00Z", "2026-11-29T10-03-00Z"))) {
    x <- jsonlite::read_json(file.path(run, "tfruns.d", "metrics.json"), simplifyVector = TRUE)$epoch
    expect_false(anyNA(x), info = run)
    expect_identical(x[[length(x)]], 300L, info = run)
  }
  expect_identical(readLines(file.path(ours, "tfruns.d", "properties", "global_step")), "300")
  # the old format's 'step' array was charted as a metric and read "1/300"
  old_run <- file.path("runs", "2026-11-29T10-05-00Z")
  expect_true("step" %in% names(tfruns_rule_charts(jsonlite::read_json(
    file.path(old_run, "tfruns.d", "metrics.json"), simplifyVector = TRUE))))
  expect_identical(tfruns_rule_progress(old_run)$shown, "1/300")
})

test_that("R keeps no copy of the run columns' rules: their types are the core's (issue 33.4)", {
  expect_identical(system.file("schema", "run_columns.json", package = "tpuestimatorr"), "")
  folder <- fixture_path("runs")
  skip_if_not(dir.exists(folder), "tests/fixtures/runs not found")
  old <- setwd(folder)
  on.exit(setwd(old), add = TRUE)
  core <- py_to_r_json(tpuestimatorr:::py_bridge()$runs_columns("runs"), simplify = FALSE)
  df <- tpu_ls_runs("runs", order = NULL)
  expect_identical(run_column_types(df), unlist(core$types))
  expect_identical(df$run_dir, unlist(core$columns$run_dir))  # newest first, as listed
})
