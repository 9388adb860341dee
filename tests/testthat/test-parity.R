# The same config and data (tests/fixtures/parity) give the same final eval loss from R as from
# Python; runs made by both show up in tpu_ls_runs() alike.

# Both Python trainings of this file run in ONE Python process (a fork of the session's fork
# server: no TensorFlow start-up of its own, about 7 CPU s), once per test session on first
# use, into a session folder: `job` is run_job() on the parity fixture (its run recorded in
# <folder>/runs), `table` is train_table() on tables/cars.csv. `python` is the fork server's
# launcher (helper-fork-python.R; the cluster tests started it already): a real process whose
# TensorFlow import is not what is compared.
parity_python <- new.env()

python_parity_results <- function(python, config, csv) {
  if (!is.null(parity_python$results)) return(parity_python$results)
  out_dir <- tempfile("parity-python-")
  dir.create(out_dir)
  script <- paste(
    "import json, os, sys",
    "from tpuestimator.jobs.job import run_job",
    "from tpuestimator.tables import train_table",
    "config, csv, out = sys.argv[1:4]",
    "os.chdir(out)",
    "r = run_job(config, model_dir=os.path.join(out, 'models', 'py'), runs_dir=os.path.join(out, 'runs'))",
    "job = {'loss': float(r.metrics['loss']), 'run_dir': str(r.run_dir), 'step': int(r.global_step)}",
    "cfg = {'train': {'batch_size': 8, 'max_steps': 60, 'iterations_per_loop': 20, 'save_checkpoints_steps': 60},",
    "       'eval': {'batch_size': 8}, 'export': {'enabled': False}}",
    "t = train_table(csv, label='mpg', model='wide_and_deep', missing='mean', out_dir=os.path.join(out, 'py'),",
    "                config=cfg)",
    "table = {'loss': float(t.metrics['loss']), 'rmse': float(t.metrics['rmse'])}",
    "print('RESULT ' + json.dumps({'job': job, 'table': table}))",
    sep = "\n"
  )
  env <- c(TF_CPP_MIN_LOG_LEVEL = "2")
  args <- c("-c", shQuote(script), shQuote(config), shQuote(csv), shQuote(out_dir))
  out <- withr::with_envvar(env, system2(python, args, stdout = TRUE, stderr = TRUE))
  status <- attr(out, "status")
  line <- grep("^RESULT ", out, value = TRUE)
  if (!is.null(status) && status != 0 || !length(line)) {
    stop("Python run_job/train_table failed:\n", paste(utils::tail(out, 30), collapse = "\n"))
  }
  parity_python$results <- jsonlite::fromJSON(sub("^RESULT ", "", line[[length(line)]]))
  parity_python$results
}

test_that("R and Python give the same final eval loss on the parity fixture", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  python <- skip_if_no_python_exe()
  work <- local_work_dir()
  config <- fixture_path("parity", "parity.yaml")
  py <- python_parity_results(forked_python_launcher() %||% python, config, fixture_path("tables", "cars.csv"))$job
  # the Python run folder beside the R one, in this test's runs/
  dir.create(file.path(work, "runs"))
  file.copy(py$run_dir, file.path(work, "runs"), recursive = TRUE)
  py$run_dir <- file.path(work, "runs", basename(py$run_dir))
  r <- quietly(tpu_train(config, model_dir = file.path(work, "models", "r"), runs_dir = file.path(work, "runs"),
                         verbose = FALSE))
  expect_identical(r$global_step, as.integer(py$step))
  expect_true(is.finite(r$metrics$loss))
  expect_lt(abs(r$metrics$loss - py$loss), 1e-5)

  # tpu_ls_runs() lists both runs, with the same tfruns columns
  runs <- tpu_ls_runs(file.path(work, "runs"))
  expect_equal(nrow(runs), 2L)
  expect_setequal(normalizePath(runs$run_dir), normalizePath(c(py$run_dir, r$run_dir)))
  for (col in c("eval_loss", "metric_loss", "metric_val_loss", "flag_learning_rate", "flag_model",
                "max_steps", "epochs", "epochs_completed", "script", "start", "end", "completed", "model_dir")) {
    expect_true(col %in% names(runs), info = col)
    expect_false(anyNA(runs[[col]]), info = col)
  }
  expect_true(all(runs$completed))
  expect_lt(abs(runs$eval_loss[[1]] - runs$eval_loss[[2]]), 1e-5)
  expect_equal(runs$flag_learning_rate, c(0.1, 0.1))
  expect_identical(runs$flag_model, c("linear", "linear"))
  for (d in runs$run_dir) expect_tfruns_run(d)

  # a run read back from disk points at its model folder
  info <- tpu_run_info(r$run_dir)
  expect_identical(normalizePath(info$model_dir), normalizePath(file.path(work, "models", "r")))
  expect_equal(info$metrics$loss, r$metrics$loss, tolerance = 1e-6)
})

test_that("R and Python give the same final eval loss on the same table and config (tables/cars.csv)", {
  skip_if_no_tpuestimator()
  skip_if_no_fixtures()
  python <- skip_if_no_python_exe()
  work <- local_work_dir()
  csv <- fixture_path("tables", "cars.csv")
  py <- python_parity_results(forked_python_launcher() %||% python, fixture_path("parity", "parity.yaml"), csv)$table
  r <- quietly(tpu_train(utils::read.csv(csv), label = "mpg", model = "wide_and_deep", missing = "mean",
                         train.batch_size = 8L, train.max_steps = 60L, train.iterations_per_loop = 20L,
                         train.save_checkpoints_steps = 60L, eval.batch_size = 8L, export.enabled = FALSE,
                         model_dir = file.path(work, "r"), verbose = FALSE))
  expect_true(is.finite(r$metrics$loss))
  expect_lt(abs(r$metrics$loss - py$loss), 1e-5)
  expect_lt(abs(r$metrics$rmse - py$rmse), 1e-5)
})
