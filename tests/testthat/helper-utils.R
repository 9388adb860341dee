# Fixture paths and expectations shared by the tests.

# tests/fixtures of the repository: TPUESTIMATOR_FIXTURES, else found by walking up from the
# tests folder (R CMD check copies tests/ -- fixtures included -- into pkg.Rcheck/tests/).
find_fixtures_dir <- function() {
  env <- Sys.getenv("TPUESTIMATOR_FIXTURES", "")
  if (nzchar(env) && file.exists(file.path(env, "bad_data.json"))) return(normalizePath(env))
  start <- tryCatch(testthat::test_path("."), error = function(e) getwd())
  dir <- normalizePath(start, mustWork = FALSE)
  for (i in 1:6) {
    for (cand in c(file.path(dir, "fixtures"), file.path(dir, "tests", "fixtures"))) {
      if (file.exists(file.path(cand, "bad_data.json"))) return(normalizePath(cand))
    }
    parent <- dirname(dir)
    if (identical(parent, dir)) break
    dir <- parent
  }
  NULL
}

# Found once, while the working directory is still the tests folder (tests change it).
.fixtures_dir <- find_fixtures_dir()
fixtures_dir <- function() .fixtures_dir

fixture_path <- function(...) {
  if (is.null(.fixtures_dir)) stop("tests/fixtures not found: set TPUESTIMATOR_FIXTURES")
  file.path(.fixtures_dir, ...)
}

# A fresh working folder for the test: runs/ and models/ land there, removed afterwards.
local_work_dir <- function(env = parent.frame()) {
  dir <- tempfile("tpu-test-")
  dir.create(dir)
  withr::local_dir(dir, .local_envir = env)
  withr::defer(unlink(dir, recursive = TRUE), envir = env)
  normalizePath(dir)
}

# The value of `expr` and the messages of the warnings it raised (muffled).
with_warnings <- function(expr) {
  warnings <- character()
  value <- withCallingHandlers(expr, warning = function(w) {
    warnings <<- c(warnings, conditionMessage(w))
    invokeRestart("muffleWarning")
  })
  list(value = value, warnings = warnings)
}

# The value of `expr` and the messages it signalled (muffled).
collect_messages <- function(expr) {
  msgs <- character()
  value <- withCallingHandlers(expr, message = function(m) {
    msgs <<- c(msgs, conditionMessage(m))
    invokeRestart("muffleMessage")
  })
  list(value = value, messages = msgs)
}

# A table training of a few steps, for tests that check what a table run says or refuses.
tiny_steps <- list(train.max_steps = 10L, train.batch_size = 8L, train.iterations_per_loop = 10L,
                   train.save_checkpoints_steps = 10L, eval.batch_size = 8L)

# Runs a test's training quietly (progress lines and Python warnings off the console).
quietly <- function(expr) suppressMessages(suppressWarnings(expr))

# The rules of docs/RUN_FORMAT.md that make a run listable by tfruns.
expect_tfruns_run <- function(run_dir) {
  meta <- file.path(run_dir, "tfruns.d")
  expect_true(dir.exists(meta), info = run_dir)
  expect_match(basename(run_dir), "^\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}(\\.\\d+)?Z$")
  for (prop in c("start", "end", "script", "completed")) {
    expect_true(file.exists(file.path(meta, "properties", prop)), info = paste(run_dir, prop))
  }
  start <- as.numeric(readLines(file.path(meta, "properties", "start"), warn = FALSE))
  end <- as.numeric(readLines(file.path(meta, "properties", "end"), warn = FALSE))
  expect_true(is.finite(start) && is.finite(end) && end >= start)
  for (f in list.files(meta, pattern = "\\.json$", full.names = TRUE)) {
    text <- paste(readLines(f, warn = FALSE), collapse = "\n")
    expect_false(grepl("\\bNaN\\b|\\bInfinity\\b", text), info = f)
    expect_silent(jsonlite::fromJSON(text))
  }
  flags_file <- file.path(meta, "flags.json")
  if (file.exists(flags_file)) {
    flags <- jsonlite::read_json(flags_file)
    expect_true(is.list(flags) && (length(flags) == 0 || !is.null(names(flags))))
    for (v in flags) expect_true(!is.null(v) && !is.list(v) && length(v) == 1L)
  }
  eval_file <- file.path(meta, "evaluation.json")
  if (file.exists(eval_file)) {
    text <- paste(readLines(eval_file, warn = FALSE), collapse = "")
    expect_match(text, "^\\s*\\{")
    evaluation <- jsonlite::read_json(eval_file)
    for (v in evaluation) expect_false(is.null(v))
  }
  metrics_file <- file.path(meta, "metrics.json")
  if (file.exists(metrics_file)) {
    metrics <- jsonlite::read_json(metrics_file)
    expect_equal(length(unique(lengths(metrics))), 1L)
  }
  invisible(run_dir)
}

# Writes a run folder the way tfruns/keras would, for tests that need no Python.
write_fake_run <- function(runs_dir, name, evaluation = list(loss = 0.5, accuracy = 0.8),
                           metrics = list(loss = c(1, 0.7, 0.5), val_loss = c(1.1, 0.8, 0.6)),
                           flags = list(learning_rate = 0.01, model = "cnn"), completed = TRUE,
                           start = 1795000000) {
  dir <- file.path(runs_dir, name)
  props <- file.path(dir, "tfruns.d", "properties")
  dir.create(props, recursive = TRUE)
  writeLines(format(start, nsmall = 3), file.path(props, "start"))
  writeLines(format(start + 60, nsmall = 3), file.path(props, "end"))
  writeLines(if (completed) "TRUE" else "FALSE", file.path(props, "completed"))
  writeLines("train.R", file.path(props, "script"))
  writeLines("3", file.path(props, "steps"))
  writeLines("local", file.path(props, "context"))
  writeLines("training", file.path(props, "type"))
  jsonlite::write_json(evaluation, file.path(dir, "tfruns.d", "evaluation.json"), auto_unbox = TRUE, digits = NA)
  jsonlite::write_json(metrics, file.path(dir, "tfruns.d", "metrics.json"), digits = NA, na = "null")
  jsonlite::write_json(flags, file.path(dir, "tfruns.d", "flags.json"), auto_unbox = TRUE, digits = NA)
  dir.create(file.path(dir, "logs"))
  normalizePath(dir)
}

# A small config list on fixture data (paths absolute), trained in a few seconds.
bad_data_config <- function(case) {
  data <- case$data
  for (key in c("train", "eval")) data[[key]] <- fixture_path(data[[key]])
  list(
    name = paste0("bad_", case$name),
    model = if (identical(data$format, "features")) "linear" else "cnn",
    data = data,
    train = list(batch_size = 4L, max_steps = 10L, iterations_per_loop = 10L, save_checkpoints_steps = 10L),
    eval = list(batch_size = 4L),
    export = list(enabled = FALSE),
    run = list(seed = 1L)
  )
}
