# Issue 34 item 9: a quiet R session. library(tpuestimatorr) loads neither reticulate nor
# Python (the first call that needs them does); training a table and predicting print no
# TensorFlow C++ line, Keras warning or SavedModel renaming note unless asked for with
# options(tpuestimatorr.tf_log = TRUE). Python's exit handlers run when such a session quits.
# Child R sessions of the installed package.

run_child_r_log <- function(lines, env = character()) {
  writeLines(lines, "child.R")
  env <- c(paste0("R_LIBS=", paste(.libPaths(), collapse = .Platform$path.sep)), env)
  status <- system2(file.path(R.home("bin"), "Rscript"), "child.R", env = env, stdout = "child.log",
                    stderr = "child.log")
  list(status = status, log = readLines("child.log"))
}

tf_noise <- "oneDNN|cpu_feature_guard|InitializeLog|^[IWE][0-9]{4} |UserWarning|contains input name"

test_that("a quiet R session: no Python at library(), no TensorFlow line unless asked, exit handlers at its end", {
  skip_if_no_tpuestimator()
  work <- local_work_dir()
  dir.create("tmp")  # the child's temporary folder (TMPDIR): R's and Python's
  quiet <- run_child_r_log(c(
    "library(tpuestimatorr)",
    "cat('reticulate loaded:', isNamespaceLoaded('reticulate'), '\\n')",
    "df <- data.frame(x = seq_len(40) / 40, g = rep(c('a', 'b'), 20)); df$y <- 2 * df$x + 1",
    "run <- tpu_train(df, label = 'y', model = 'linear', train.max_steps = 10L, train.batch_size = 8L,",
    "                 train.iterations_per_loop = 10L, train.save_checkpoints_steps = 10L, eval.batch_size = 8L,",
    "                 verbose = FALSE, model_dir = 'm')",
    "cat('predicted', nrow(predict(run, df[1:2, ])), '\\n')",
    "cat('generated files', length(list.files(Sys.getenv('TMPDIR'), '^__autograph_generated_file')), '\\n')"
  ), env = c("TF_CPP_MIN_LOG_LEVEL=", paste0("TMPDIR=", normalizePath("tmp"))))
  log <- paste(quiet$log, collapse = "\n")
  expect_identical(quiet$status, 0L, info = log)
  expect_true("reticulate loaded: FALSE " %in% quiet$log, info = log)
  expect_true("predicted 2 " %in% quiet$log, info = log)
  expect_false(any(grepl(tf_noise, quiet$log)), info = log)
  # Python's exit handlers ran when R quit (reticulate does not run them): TensorFlow's removed
  # the source files AutoGraph generated during the session from the temporary folder
  generated <- as.integer(sub("generated files ", "", grep("^generated files", quiet$log, value = TRUE)))
  expect_gt(generated, 0)
  expect_identical(list.files("tmp", "^__autograph_generated_file"), character())
  # asked for: TensorFlow's start-up lines are there (so their absence above means something)
  loud <- run_child_r_log(c(
    "library(tpuestimatorr)",
    "options(tpuestimatorr.tf_log = TRUE)",
    "invisible(tpuestimatorr:::quiet_python_console())",
    "tf <- reticulate::import('tensorflow')",
    "invisible(tf$constant(1))"
  ), env = "TF_CPP_MIN_LOG_LEVEL=")
  expect_true(any(grepl("oneDNN|cpu_feature_guard|InitializeLog", loud$log)), info = paste(loud$log, collapse = "\n"))
})
