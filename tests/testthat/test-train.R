# The one full digits training of the R suite, then evaluate / predict / export on it.

digits_cache <- new.env()

digits_run <- function() {
  if (is.null(digits_cache$run)) {
    dir <- tempfile("digits-")
    dir.create(dir)
    digits_cache$dir <- dir
    digits_cache$lines <- character()
    withCallingHandlers(
      digits_cache$run <- suppressWarnings(tpu_train(
        tpu_example("digits", dir = file.path(dir, "example")),
        model_dir = file.path(dir, "models"), runs_dir = file.path(dir, "runs")
      )),
      message = function(m) {
        digits_cache$lines <- c(digits_cache$lines, conditionMessage(m))
        invokeRestart("muffleMessage")
      }
    )
  }
  digits_cache$run
}

test_that("tpu_train(tpu_example('digits')) reaches 95% eval accuracy and prints progress", {
  skip_if_no_tpuestimator()
  run <- digits_run()
  expect_s3_class(run, "tpu_run")
  expect_gte(run$metrics$accuracy, 0.95)
  expect_identical(run$global_step, 1500L)
  expect_true(dir.exists(run$run_dir))
  expect_true(dir.exists(run$export_dir))
  expect_true(file.exists(file.path(run$export_dir, "saved_model.pb")))
  expect_s3_class(run$history, "data.frame")
  expect_identical(run$history$step, c(500L, 1000L, 1500L))
  expect_identical(run$config$name, "digits")
  # live progress reached R through the R callback
  lines <- digits_cache$lines
  expect_true(any(grepl("^begin \\| max steps: 1500", lines)))
  expect_true(any(grepl("^train \\| step: 1500/1500 \\| steps/sec: [0-9.]+ \\| loss: [0-9.]+", lines)))
  expect_true(any(grepl("^eval  \\| step: 1500 \\| loss: [0-9.]+ \\| accuracy: [0-9.]+", lines)))
  expect_output(print(run), "evaluation:  loss")
  expect_output(print(summary(run)), "Evaluation history")
  expect_tfruns_run(run$run_dir)
})

test_that("tpu_evaluate() on a run, its folder and other data", {
  skip_if_no_tpuestimator()
  run <- digits_run()
  m <- quietly(tpu_evaluate(run))
  expect_equal(m$accuracy, run$metrics$accuracy, tolerance = 1e-6)
  m2 <- quietly(tpu_evaluate(run$run_dir, data = file.path(digits_cache$dir, "example", "eval.tfrecord")))
  expect_equal(m2$loss, m$loss, tolerance = 1e-6)
  expect_error(tpu_evaluate(file.path(digits_cache$dir, "nope")), "no such folder")
})

test_that("tpu_predict() takes arrays, matrices, lists and TFRecord files and names classes", {
  skip_if_no_tpuestimator()
  run <- digits_run()
  images <- array(runif(5 * 64), dim = c(5, 8, 8, 1))
  p <- quietly(tpu_predict(run, images))
  expect_s3_class(p, "data.frame")
  expect_equal(nrow(p), 5L)
  expect_identical(names(p)[1:2], c("class_id", "class"))
  expect_true(all(paste0("prob_", 0:9) %in% names(p)))
  expect_equal(rowSums(p[paste0("prob_", 0:9)]), rep(1, 5), tolerance = 1e-4)
  expect_identical(p$class, as.character(p$class_id))
  # a flattened matrix (row-major, as numpy) and a named list give the same answer for the same pixels
  flat <- t(apply(images, 1, function(im) as.vector(t(im[, , 1]))))
  expect_equal(quietly(tpu_predict(run, flat))$class_id, p$class_id)
  expect_equal(quietly(tpu_predict(run, list(image = images)))$class_id, p$class_id)
  expect_error(tpu_predict(run, matrix(0, 2, 10)), "has shape \\[8, 8, 1\\]")
  # TFRecord files: accuracy on the eval set matches the evaluation
  eval_file <- file.path(digits_cache$dir, "example", "eval.tfrecord")
  pr <- quietly(tpu_predict(run$run_dir, eval_file))
  expect_equal(nrow(pr), 360L)
})

test_that("tpu_evaluate() on an export: metrics, per-class table, confusion matrix, a run record", {
  skip_if_no_tpuestimator()
  run <- digits_run()
  runs <- file.path(digits_cache$dir, "eval-runs")
  m <- quietly(tpu_evaluate(run$export_dir, runs_dir = runs))
  expect_equal(m$accuracy, run$metrics$accuracy, tolerance = 1e-6)
  expect_equal(m$log_loss, run$metrics$loss, tolerance = 1e-4)
  expect_true(m$auc > 0.9 && m$auc <= 1)
  expect_identical(m$num_examples, 360L)
  expect_s3_class(m$per_class, "data.frame")
  expect_identical(names(m$per_class), c("class_id", "class", "precision", "recall", "f1", "support"))
  expect_identical(m$per_class$class, as.character(0:9))
  expect_identical(dim(m$confusion_matrix), c(10L, 10L))
  expect_identical(sum(m$confusion_matrix), 360L)
  expect_equal(sum(diag(m$confusion_matrix)) / 360, m$accuracy, tolerance = 1e-12)
  expect_identical(as.integer(unname(rowSums(m$confusion_matrix))), m$per_class$support)
  expect_tfruns_run(m$run_dir)
  expect_true(file.exists(file.path(m$run_dir, "confusion_matrix.png")))
  expect_identical(nrow(utils::read.csv(file.path(m$run_dir, "per_class.csv"))), 10L)
  m2 <- quietly(tpu_evaluate(run$export_dir, data = file.path(digits_cache$dir, "example", "eval.tfrecord"),
                             record = FALSE))
  expect_identical(m2$confusion_matrix, m$confusion_matrix)
  expect_null(m2$run_dir)
  expect_error(tpu_evaluate(run$export_dir, record = NA), "`record` must be TRUE or FALSE")
  expect_error(tpu_evaluate(run$export_dir, data = 3), "`data` must be NULL or a glob")
})

test_that("tpu_predict() streams TFRecord files and patterns, into a data frame or a file", {
  skip_if_no_tpuestimator()
  run <- digits_run()
  example <- file.path(digits_cache$dir, "example")
  p <- quietly(tpu_predict(run$export_dir, file.path(example, "*.tfrecord"), batch_size = 500L))
  expect_identical(nrow(p), 1797L)
  expect_identical(names(p)[1:4], c("source", "index", "class_id", "class"))
  expect_identical(p$index[p$source == p$source[1]], seq_len(360L) - 1L)
  expect_equal(rowSums(p[paste0("prob_", 0:9)]), rep(1, 1797), tolerance = 1e-4)
  out <- file.path(digits_cache$dir, "preds.csv")
  expect_identical(quietly(tpu_predict(run$export_dir, file.path(example, "eval.tfrecord"), out = out)), out)
  written <- utils::read.csv(out)
  expect_identical(nrow(written), 360L)
  expect_identical(written$class_id, p$class_id[p$source == normalizePath(file.path(example, "eval.tfrecord"))])
  expect_error(tpu_predict(run$export_dir, file.path(example, "eval.tfrecord"), out = "p.txt"), "`out` must be")
  expect_error(tpu_predict(run$export_dir, array(0, c(1, 8, 8, 1)), out = out), "`out` must be NULL unless")
  expect_error(tpu_predict(run$export_dir, file.path(example, "eval.tfrecord"), batch_size = 0L), "batch_size")
  expect_error(quietly(tpu_predict(run$export_dir, file.path(example, "none-*.tfrecord"))), "none-")
})

test_that("tpu_export() writes a SavedModel and a TFLite file", {
  skip_if_no_tpuestimator()
  run <- digits_run()
  out <- file.path(digits_cache$dir, "exports")
  sm <- quietly(tpu_export(run, out))
  expect_true(file.exists(file.path(sm, "saved_model.pb")))
  expect_equal(nrow(quietly(tpu_predict(sm, array(0, c(1, 8, 8, 1))))), 1L)
  lite <- quietly(tpu_export(run, file.path(digits_cache$dir, "lite"), format = "tflite"))
  expect_match(lite, "\\.tflite$")
  expect_gt(file.size(lite), 1000)
  expect_true(attr(lite, "tflite")$passed)
  expect_lte(attr(lite, "tflite")$max_abs_diff, 1e-4)
  # dynamic-range quantization with warmup requests: the verification comes back as an attribute
  small <- quietly(tpu_export(run, file.path(digits_cache$dir, "lite"), format = "tflite", quantize = "dynamic",
                              warmup = 2L))
  expect_match(small, "-dynamic\\.tflite$")
  report <- attr(small, "tflite")
  expect_gte(report$top1_agreement, 0.99)
  expect_lt(report$tflite_bytes, attr(lite, "tflite")$tflite_bytes / 2)
  expect_true(file.exists(file.path(attr(small, "saved_model"), "assets.extra", "tf_serving_warmup_requests")))
})

test_that("tpu_export() checks format, quantize and warmup before calling Python", {
  expect_error(tpu_export("nowhere", tempfile(), format = "onnx"), "should be one of")
  expect_error(tpu_export("nowhere", tempfile(), format = "tflite", quantize = "int4"),
               paste("`quantize` must be NULL or one of \"none\", \"dynamic\", \"float16\", \"int8\".",
                     "Received: quantize = \"int4\""), fixed = TRUE)
  expect_error(tpu_export("nowhere", tempfile(), quantize = "int8"),
               "`quantize` must be NULL unless format = \"tflite\"", fixed = TRUE)
  expect_error(tpu_export("nowhere", tempfile(), warmup = -1L),
               "`warmup` must be NULL or a whole number from 0 to 1000")
  expect_error(tpu_export("nowhere", tempfile(), warmup = 2.5), "`warmup` must be a single whole number")
  expect_error(tpu_export("nowhere", tempfile(), warmup = 1001L), "Received: warmup = 1001L")
})

test_that("tpu_check() reports TPU readiness", {
  skip_if_no_tpuestimator()
  rep <- quietly(tpu_check(tpu_example("digits", dir = tempfile()), train.batch_size = 60L))
  expect_s3_class(rep, "tpu_check_report")
  expect_false(rep$ok)
  expect_true(any(grepl("train.batch_size", rep$results$name) & !rep$results$ok))
  expect_output(print(rep), "NOT ready for TPU")
})

test_that("the tfestimators-style API: tpu_estimator(), train(), evaluate(), predict(), export_savedmodel()", {
  skip_if_no_tpuestimator()
  local_work_dir()
  est <- tpu_estimator(config = tpu_example("digits", dir = "ex"), model_dir = "models/est",
                       params = list(learning_rate = 0.01))
  expect_s3_class(est, "tpu_estimator")
  expect_equal(est$config$params$learning_rate, 0.01)
  run <- quietly(train(est, max_steps = 10L, verbose = FALSE))
  expect_identical(run$global_step, 10L)
  run2 <- quietly(train(est, steps = 10L, verbose = FALSE))  # continues from the checkpoint
  expect_identical(run2$global_step, 20L)
  m <- quietly(evaluate(est))
  expect_true(all(c("loss", "accuracy") %in% names(m)))
  p <- quietly(predict(est, array(runif(2 * 64), c(2, 8, 8, 1))))
  expect_equal(nrow(p), 2L)
  path <- quietly(export_savedmodel(est, file.path(tempdir(), "est-export")))
  expect_true(file.exists(file.path(path, "saved_model.pb")))
  expect_equal(nrow(tpu_ls_runs()), 2L)
  expect_error(train(est, steps = 1L, max_steps = 2L), "either `steps`")
  expect_output(print(est), "<tpu_estimator> digits")
})

test_that("progress lines follow the events of the core's ProgressCallbackHook", {
  fmt <- tpuestimatorr:::format_progress
  expect_identical(fmt("begin", list(step = 0L, max_steps = 1500L)), "begin | max steps: 1500 | start step: 0")
  expect_identical(fmt("loop", list(step = 200L, max_steps = 1000L, loss = 0.31, steps_per_sec = 51.25)),
                   "train | step: 200/1000 | steps/sec: 51.25 | loss: 0.3100")
  # after an evaluation during training, the held-out loss stands beside the training loss
  expect_identical(fmt("loop", list(step = 600L, max_steps = 1000L, loss = 0.43, steps_per_sec = 51.25,
                                    eval_loss = 1.22)),
                   "train | step: 600/1000 | steps/sec: 51.25 | loss: 0.4300 | eval loss: 1.220")
  expect_identical(fmt("eval", list(step = 500L, metrics = list(loss = 0.5, accuracy = 0.25, global_step = 500L))),
                   "eval  | step: 500 | loss: 0.5000 | accuracy: 0.2500")
  expect_identical(fmt("end", list(step = 1500L, loss = 0.1)), "end   | step: 1500")
  expect_null(fmt("before_loop", list(step = 1L)))
})
