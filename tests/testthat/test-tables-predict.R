# predict() on a table model (docs/tables.md): `class` is a factor with the training label's
# levels, one prob_<class> column per class, a category never seen in training is no error.
# The label's levels are deliberately not alphabetical (iris's are), so a default factor()
# cannot pass; the classes are compared with the truth of data that one column decides.

test_that("predict() on a data frame gives the training factor's levels in its order, and the true classes", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  sizes <- c("small", "medium", "large")          # the levels' order, not alphabetical
  code <- rep(c("s", "m", "l"), times = 20)
  truth <- c(s = "small", m = "medium", l = "large")
  table <- data.frame(code = code, size = factor(truth[code], levels = sizes))
  run <- quietly(tpu_train(table, label = "size", model = "linear", train.max_steps = 60L,
                           train.batch_size = 8L, train.iterations_per_loop = 20L,
                           train.save_checkpoints_steps = 60L, eval.batch_size = 8L,
                           params.learning_rate = 0.3, model_dir = file.path(work, "model"),
                           runs_dir = file.path(work, "runs"), verbose = FALSE))
  newdata <- data.frame(code = c("l", "s", "m", "m", "never seen"))
  pred <- predict(run, newdata)
  expect_s3_class(pred$class, "factor")
  expect_identical(levels(pred$class), sizes)
  expect_identical(nrow(pred), 5L)                                   # the unseen category: a row, no error
  expect_identical(as.character(pred$class[1:4]), unname(truth[c("l", "s", "m", "m")]))
  probs <- as.matrix(pred[, paste0("prob_", sizes)])
  expect_equal(unname(rowSums(probs)), rep(1, 5), tolerance = 1e-5)
  # class, class_id and the probability columns say the same: the class is the most probable one
  expect_identical(as.character(pred$class), sizes[max.col(probs, ties.method = "first")])
  expect_identical(pred$class_id, as.integer(pred$class) - 1L)
})
