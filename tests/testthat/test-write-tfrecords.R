test_that("tpu_write_tfrecords() writes a data frame with a factor label, ready to train on", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  set.seed(1)
  n <- 60
  df <- data.frame(x1 = c(rnorm(n / 2, -2), rnorm(n / 2, 2)), x2 = rnorm(n),
                   label = factor(rep(c("neg", "pos"), each = n / 2), levels = c("pos", "neg")))
  manifest <- quietly(tpu_write_tfrecords(df, "records", split = 0.25, seed = 1L))
  expect_true(file.exists(manifest$path))
  # the factor's levels in their order (not alphabetical), id 0 = the first level
  expect_identical(unlist(manifest$vocabulary), c("pos", "neg"))
  expect_equal(manifest$splits$train$count + manifest$splits$eval$count, n)
  run <- quietly(tpu_train(list(name = "tab", model = "linear", params = list(learning_rate = 0.1),
                                data = list(manifest = manifest$path),
                                train = list(batch_size = 8L, max_steps = 20L, iterations_per_loop = 10L,
                                             save_checkpoints_steps = 10L),
                                eval = list(batch_size = 8L)), verbose = FALSE))
  expect_true(is.finite(run$metrics$loss))
  p <- quietly(tpu_predict(run, df[c(1, 2, 59, 60), c("x1", "x2")]))
  expect_equal(nrow(p), 4L)
  expect_true(all(c("prob_neg", "prob_pos") %in% names(p)))
  # each class is the more probable one by name, and the truth (x1 near -2: neg, near 2: pos)
  expect_identical(as.character(p$class), ifelse(p$prob_pos > p$prob_neg, "pos", "neg"))
  expect_identical(as.character(p$class), as.character(df$label[c(1, 2, 59, 60)]))
  err <- expect_error(quietly(tpu_write_tfrecords(df, "records")), class = "tpuestimator_data_error")
  expect_match(conditionMessage(err), "already holds")
})

test_that("tpu_write_tfrecords() writes integer image arrays in the mnist format", {
  skip_if_no_tpuestimator()
  local_work_dir()
  images <- array(sample(0:255, 20 * 8 * 8, TRUE), dim = c(20, 8, 8))
  labels <- rep(0:1, 10)
  manifest <- quietly(tpu_write_tfrecords(list(image = images, label = labels), "img", format = "mnist",
                                          split = 0.2))
  expect_identical(manifest$format, "mnist")
  expect_identical(as.integer(unlist(manifest$image)), c(8L, 8L, 1L))
})
