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

# An IDX file as MNIST writes it: big-endian magic and sizes, then the bytes (row-major).
write_idx <- function(path, values, dims, magic = if (length(dims) == 3L) 2051L else 2049L, gz = FALSE) {
  con <- if (gz) gzfile(path, "wb") else file(path, "wb")
  on.exit(close(con))
  writeBin(as.integer(c(magic, dims)), con, size = 4L, endian = "big")
  writeBin(as.raw(values), con)
  path
}

test_that("tpu_write_tfrecords() writes an IDX pair in the mnist format, and rejects a bad one", {
  skip_if_no_tpuestimator()
  local_work_dir()
  n <- 12L
  pixels <- (seq_len(n * 3L * 2L) * 7L) %% 256L   # 12 images of 3x2
  write_idx("train-images-idx3-ubyte.gz", pixels, c(n, 3L, 2L), gz = TRUE)
  write_idx("my-labels.idx1", rep(0:2, 4L), n)
  manifest <- quietly(tpu_write_tfrecords("train-images-idx3-ubyte.gz", "idx", labels = "my-labels.idx1",
                                          split = 0.25, vocabulary = list("a", "b", "c")))
  expect_identical(manifest$format, "mnist")
  expect_identical(as.integer(unlist(manifest$image)), c(3L, 2L, 1L))
  expect_identical(c(manifest$splits$train$count, manifest$splits$eval$count), c(9L, 3L))
  expect_identical(unlist(manifest$splits$eval$class_counts), c(a = 1L, b = 1L, c = 1L))
  # labels of the wrong kind (images magic 0x00000803): one error naming the file, nothing written
  write_idx("bad-labels.idx1", rep(0:2, 4L), n, magic = 2051L)
  err <- expect_error(quietly(tpu_write_tfrecords("train-images-idx3-ubyte.gz", "bad", labels = "bad-labels.idx1")),
                      class = "tpuestimator_data_error")
  expect_match(conditionMessage(err), "bad-labels.idx1: magic number 0x00000803, expected 0x00000801", fixed = TRUE)
  expect_false(dir.exists("bad"))
})

test_that("tpu_example(\"fashion_mnist\") writes the real dataset's records and a config that trains", {
  skip_if_no_tpuestimator()
  skip_if_no_fashion_mnist()
  local_work_dir()
  path <- quietly(tpu_example("fashion_mnist", dir = "fm", limit = 600))
  expect_identical(basename(path), "fashion_mnist.yaml")
  expect_true(all(file.exists(file.path("fm", c("train.tfrecord", "eval.tfrecord", "labels.txt", "manifest.json")))))
  expect_identical(readLines(file.path("fm", "labels.txt"))[c(1L, 10L)], c("T-shirt/top", "Ankle boot"))
  manifest <- jsonlite::fromJSON(file.path("fm", "manifest.json"))
  expect_identical(c(manifest$splits$train$count, manifest$splits$eval$count), c(600L, 100L))
  run <- quietly(tpu_train(path, train.max_steps = 20L, train.batch_size = 16L, train.iterations_per_loop = 10L,
                           train.save_checkpoints_steps = 20L, eval.batch_size = 100L,
                           params.filters = list(8L, 16L), model_dir = "model", runs_dir = "runs",
                           export = FALSE, verbose = FALSE))
  expect_identical(as.integer(run$metrics$num_examples), 100L)
  expect_true(is.finite(run$metrics$loss))
  err <- expect_error(quietly(tpu_example("fashion_mnist", dir = "none", from = "fm")),
                      class = "tpuestimator_data_error")
  expect_match(conditionMessage(err), "dataset-fashion-mnist")
  expect_match(conditionMessage(err), "zalandoresearch/fashion-mnist", fixed = TRUE)
})
