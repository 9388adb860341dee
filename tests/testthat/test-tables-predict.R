# predict() on a table model (docs/tables.md): `class` is a factor with the training label's
# levels, one prob_<class> column per class, a category never seen in training is no error.
# The label's levels are deliberately not alphabetical (iris's are), so a default factor()
# cannot pass; the classes are compared with the truth of data that one column decides.

test_that("predict() on a data frame gives the training factor's levels in its order, and the true classes", {
  skip_if_no_tpuestimator()
  sizes <- size_levels                            # helper-tables-shared.R: the levels' order, not alphabetical
  run <- shared_size_classifier()                 # `size` from `code`; `weight` tells nothing
  newdata <- data.frame(code = c("l", "s", "m", "m", "never seen"), weight = c(1, 2, 3, 4, 2))
  pred <- predict(run, newdata)
  expect_s3_class(pred$class, "factor")
  expect_identical(levels(pred$class), sizes)
  expect_identical(nrow(pred), 5L)                                   # the unseen category: a row, no error
  expect_identical(as.character(pred$class[1:4]), unname(size_truth[c("l", "s", "m", "m")]))
  probs <- as.matrix(pred[, paste0("prob_", sizes)])
  expect_equal(unname(rowSums(probs)), rep(1, 5), tolerance = 1e-5)
  # class, class_id and the probability columns say the same: the class is the most probable one
  expect_identical(as.character(pred$class), sizes[max.col(probs, ties.method = "first")])
  expect_identical(pred$class_id, as.integer(pred$class) - 1L)
})

test_that("predict() on a one-row data frame gives the row's prediction in a larger frame, for every column type", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  # factor, character (with an NA: the missing-value path), logical, integer, double and Date
  table <- data.frame(f = factor(rep(c("a", "b", "c", "d"), 10)), s = rep(c("x", "y"), 20),
                      l = rep(c(TRUE, FALSE, FALSE, TRUE, TRUE), 8), i = 1:40, d = seq(0.5, 20, by = 0.5),
                      dt = as.Date("2020-01-01") + 0:39, stringsAsFactors = FALSE)
  table$s[3] <- NA
  table$y <- with(table, as.integer(f) + 2 * (s %in% "x") + l + 0.1 * i + d / 4 + as.numeric(dt - dt[1]) / 10)
  run <- quietly(tpu_train(table, label = "y", model = "linear", missing = list(s = "oov"),
                           train.max_steps = 20L, train.batch_size = 8L, train.iterations_per_loop = 20L,
                           train.save_checkpoints_steps = 20L, eval.batch_size = 8L,
                           model_dir = file.path(work, "model"), runs_dir = file.path(work, "runs"),
                           verbose = FALSE))
  whole <- predict(run, table[1:8, ])$prediction
  expect_true(all(is.finite(whole)) && length(unique(whole)) == 8L)  # rows told apart: a wrong row would show
  one_by_one <- vapply(1:8, function(r) predict(run, table[r, ])$prediction, numeric(1))
  # equal to float32's precision: a batch of 8 and a batch of 1 may take other matmul kernels,
  # which round differently in the last bit (seen: 6.4458265 against 6.4458270)
  expect_equal(one_by_one, whole, tolerance = 1e-6)
  # a one-row frame built as a user would (the formula workflow's transform(newcar[1, ], ...)), a
  # factor with one level in use
  row <- transform(table[5, ], f = factor("c", levels = levels(table$f)))
  expect_equal(predict(run, row)$prediction, predict(run, rbind(row, table[1:7, ]))$prediction[1], tolerance = 1e-6)
})
