# Issue 34 item 8 from R: tpu_train() on a data frame stops early on its held-out rows by
# default, and the model it evaluates, exports and predicts with is the best evaluation's. The
# table is noise (coin-flip labels), so the held-out loss is lowest early and rises as the
# `dnn` memorises the training rows.

noise_frame <- function(n, seed) {
  set.seed(seed)
  frame <- as.data.frame(matrix(rnorm(n * 6), ncol = 6, dimnames = list(NULL, paste0("x", 1:6))))
  frame$y <- factor(sample(c("a", "b"), n, replace = TRUE), levels = c("a", "b"))
  frame
}

train_noise <- function(work, ...) {
  tpu_train(noise_frame(80, 1), label = "y", model = "dnn", split = noise_frame(40, 2),
            train.max_steps = 400L, train.batch_size = 16L, params.hidden_units = list(64L, 64L),
            params.optimizer = "adam", params.learning_rate = 0.02,
            model_dir = file.path(work, "model"), runs_dir = file.path(work, "runs"), ...)
}

test_that("tpu_train() on a data frame stops early and exports the best evaluation's model", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  notes <- character()
  utils::capture.output(run <- withCallingHandlers(  # the progress lines
    suppressWarnings(train_noise(work, verbose = TRUE)),
    message = function(m) {
      notes <<- c(notes, conditionMessage(m))
      invokeRestart("muffleMessage")
    }
  ))
  every <- 5  # an epoch: 80 rows in batches of 16
  best <- run$history$step[which.min(run$history$loss)]
  expect_equal(run$history$step, seq(every, run$global_step, by = every))
  expect_true(run$stopped_early)
  expect_equal(run$global_step, best + 6 * every)  # patience 5: the 6th evaluation without improvement
  expect_lt(run$global_step, 400)
  expect_equal(run$best_step, best)
  expect_identical(basename(run$export_dir), as.character(best))
  # the held-out loss of the model predict() uses, by hand: the best evaluation's
  held_out <- noise_frame(40, 2)
  p <- predict(run, held_out)$prob_b
  y <- as.numeric(held_out$y == "b")
  expect_equal(-mean(y * log(p) + (1 - y) * log(1 - p)), min(run$history$loss), tolerance = 1e-5)
  expect_equal(run$metrics$loss, min(run$history$loss), tolerance = 1e-6)
  expect_true(any(grepl(paste0("Training stopped early at step ", run$global_step, " of 400: the held-out loss ",
                               "was best at step ", best), notes, fixed = TRUE)))
})

test_that("early_stopping = FALSE trains every step, a list sets the rule, a bad value is refused", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  off <- quietly(train_noise(file.path(work, "off"), early_stopping = FALSE, verbose = FALSE))
  expect_false(off$stopped_early)
  expect_equal(off$global_step, 400)
  expect_identical(basename(off$export_dir), "400")
  expect_equal(off$history$step, 400)  # one evaluation, at the end
  short <- quietly(train_noise(file.path(work, "short"), early_stopping = list(patience = 1L), verbose = FALSE))
  expect_equal(short$global_step, short$best_step + 2 * 5)  # patience 1: the 2nd evaluation without improvement
  expect_identical(basename(short$export_dir), as.character(short$best_step))
  expect_error(train_noise(file.path(work, "bad"), early_stopping = "yes", verbose = FALSE),
               "`early_stopping` must be TRUE (stop on the held-out loss, patience 5), FALSE", fixed = TRUE)
  expect_error(train_noise(file.path(work, "bad"), early_stopping = list(patient = 3L), verbose = FALSE),
               "`early_stopping` must be", fixed = TRUE)
  expect_false(dir.exists(file.path(work, "bad")))
})

test_that("tpu_tuning_run() on a data frame passes early_stopping to every combination", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  tune_noise <- function(name, ...) {
    quietly(tpu_tuning_run(noise_frame(80, 1), label = "y", model = "dnn", split = 1 / 3,
                           flags = list(learning_rate = c(0.02, 0.05)), train.max_steps = 200L,
                           train.batch_size = 16L, params.hidden_units = list(64L, 64L), params.optimizer = "adam",
                           runs_dir = file.path(work, name), export = FALSE, verbose = FALSE, ...))
  }
  off <- tune_noise("off", early_stopping = FALSE)
  expect_equal(nrow(off), 2L)
  expect_equal(off$global_step, c(200, 200))  # every step of every combination
  short <- tune_noise("short", early_stopping = list(patience = 1L))
  expect_equal(nrow(short), 2L)
  expect_true(all(short$global_step < 200))  # noise labels: the held-out loss rises within a few epochs
  expect_error(tune_noise("bad", early_stopping = "yes"), "`early_stopping` must be TRUE (stop on", fixed = TRUE)
  expect_false(dir.exists(file.path(work, "bad")))
  expect_error(tpu_tuning_run(list(model = "linear"), flags = list(params.learning_rate = 0.1),
                              early_stopping = FALSE, runs_dir = file.path(work, "config")),
               "`early_stopping` must be TRUE with a configuration: its eval.early_stopping", fixed = TRUE)
  expect_false(dir.exists(file.path(work, "config")))
})
