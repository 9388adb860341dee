# One small table classifier per test session, trained on first use into a session folder and
# shared by the tests that only predict with it (test-predict-csv.R, test-tables-predict.R): a
# table training costs about 3 CPU s whatever its steps. `size` is decided by `code` alone
# (s, m, l; the levels' order is not alphabetical, so a default factor() cannot pass); `weight`
# is a number whose period (4) is not the code's (3), read by the model but telling nothing.

size_levels <- c("small", "medium", "large")
size_truth <- c(s = "small", m = "medium", l = "large")

size_table <- function() {
  code <- rep(c("s", "m", "l"), times = 20)
  data.frame(code = code, weight = rep(c(1, 2, 3, 4), times = 15),
             size = factor(size_truth[code], levels = size_levels))
}

.size_classifier <- new.env(parent = emptyenv())

shared_size_classifier <- function() {
  if (is.null(.size_classifier$run)) {
    dir <- tempfile("size-classifier-")
    .size_classifier$run <- quietly(tpu_train(size_table(), label = "size", model = "linear",
                                              train.max_steps = 60L, train.batch_size = 8L,
                                              train.iterations_per_loop = 20L, train.save_checkpoints_steps = 60L,
                                              eval.batch_size = 8L, params.learning_rate = 0.3,
                                              model_dir = file.path(dir, "model"), runs_dir = file.path(dir, "runs"),
                                              verbose = FALSE))
  }
  .size_classifier$run
}
