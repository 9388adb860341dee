# Issue 22.2 on the tables path: tpu_train() on a data frame takes `flags` (tfruns's FLAGS) as
# the config path does, and inside tfruns's training_run() records into the active run.

tiny_table <- function(n = 40L) {
  x <- seq_len(n) / n
  data.frame(x = x, z = rev(x), y = 2 * x + 1)
}

# export = FALSE: nothing here reads an export (the SavedModel write is a fifth of a training)
tiny_table_args <- list(model = "linear", train.max_steps = 20L, train.batch_size = 8L,
                        train.iterations_per_loop = 10L, train.save_checkpoints_steps = 20L,
                        eval.batch_size = 8L, verbose = FALSE, export = FALSE)

test_that("flags on a data frame set the trained model's learning rate and steps; unknown flags are refused", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  train <- function(dir, ...) {
    quietly(do.call(tpu_train, c(list(tiny_table(), label = "y", model_dir = file.path(work, dir),
                                      runs_dir = file.path(work, "runs")), tiny_table_args, list(...))))
  }
  run <- train("a", flags = list(learning_rate = 0.2, max_steps = 10L))
  expect_equal(run$config$params$learning_rate, 0.2)
  expect_identical(as.integer(run$global_step), 10L)  # the flag wins over train.max_steps = 20
  recorded <- jsonlite::read_json(file.path(run$run_dir, "tfruns.d", "flags.json"))
  expect_equal(recorded$learning_rate, 0.2)
  expect_equal(recorded[["train.max_steps"]], 10L)
  # a formula takes them too, and the dotted form names the same field
  run2 <- quietly(do.call(tpu_train, c(list(y ~ x, data = tiny_table(), model_dir = file.path(work, "b"),
                                            runs_dir = file.path(work, "runs"),
                                            flags = list(params.learning_rate = 0.03)), tiny_table_args)))
  expect_equal(run2$config$params$learning_rate, 0.03)
  expect_identical(as.integer(run2$global_step), 20L)

  err <- expect_error(train("c", flags = list(learning_rat = 0.1)), class = "tpuestimator_config_error")
  expect_match(conditionMessage(err), "learning_rat=0.1", fixed = TRUE)
  expect_match(conditionMessage(err), "params.learning_rate", fixed = TRUE)
  expect_match(conditionMessage(err), "train.max_steps", fixed = TRUE)
  expect_false(dir.exists(file.path(work, "c")))  # refused before the table was written
  expect_error(train("d", flags = list(1, 2)), "`flags`")
})

test_that("training_run() of a table script applies its flags and records into tfruns's run", {
  skip_if_no_tpuestimator()
  local_real_tfruns()
  work <- local_work_dir()
  withr::local_options(tpuestimatorr.verbose = FALSE)
  writeLines(c(
    "library(tpuestimatorr)",
    "FLAGS <- tfruns::flags(tfruns::flag_numeric('learning_rate', 0.01))",
    "cars <- data.frame(x = seq_len(40) / 40, y = 2 * seq_len(40) / 40 + 1)",
    "run <- tpu_train(cars, label = 'y', model = 'linear', train.max_steps = 20L, train.batch_size = 8L,",
    "                 train.iterations_per_loop = 10L, train.save_checkpoints_steps = 20L, eval.batch_size = 8L,",
    "                 export = FALSE)"
  ), "table.R")
  quietly(tfruns::training_run("table.R", flags = list(learning_rate = 0.3), echo = FALSE, view = FALSE))
  runs <- tfruns::ls_runs()
  expect_equal(nrow(runs), 1L)
  dir <- runs$run_dir[[1]]
  props <- file.path(dir, "tfruns.d", "properties")
  expect_identical(readLines(file.path(props, "global_step")), "20")  # our record is tfruns's run
  expect_equal(as.numeric(readLines(file.path(props, "learning_rate"))), 0.3)
  expect_equal(runs$flag_learning_rate, 0.3)
  expect_true(file.exists(file.path(dir, "tfruns.d", "metrics.json")))
  expect_length(list.files("runs", pattern = "^[0-9]"), 1L)  # no second run folder of our own
  expect_false(dir.exists("models"))  # the table and model went to runs/.models/<run>, not the working dir
  expect_true(dir.exists(file.path("runs", ".models", basename(dir), "model")))
})
