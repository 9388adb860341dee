# R quick start: train the bundled digits example, look at the run, predict, export.
#
#   TPUESTIMATORR_PYTHON=.venv/bin/python Rscript examples/R/train_digits.R
#
# (or, once: install_tpuestimator(), then no environment variable is needed).

library(tpuestimatorr)

# 1. A configuration: the bundled example (8x8 digit images, a small CNN), with overrides.
cfg <- tpu_config(tpu_example("digits", dir = "digits"), train.max_steps = 1500L)
print(cfg)

# 2. Train: progress lines appear live; the run is recorded under runs/ (tfruns's format).
run <- tpu_train(cfg)
print(run)
summary(run)

# 3. Runs made from R or from Python (`tpuestimator train`) are listed alike.
print(tpu_ls_runs(latest_n = 5))
# tpu_view_run()            # HTML report of the latest run
# tpu_compare_runs()        # the two latest runs side by side
# tpu_tensorboard(run)      # TensorBoard on this run; tpu_tensorboard(action = "stop") to stop it

# 4. Evaluate again, predict on new images ([n, height, width, channels]), export.
print(tpu_evaluate(run))
images <- array(runif(3 * 8 * 8), dim = c(3, 8, 8, 1))
print(tpu_predict(run, images)[, c("class_id", "class")])
tflite <- tpu_export(run, "digits-export", format = "tflite")
cat("TFLite model:", tflite, "\n")

# 5. The same training with a model function written in R and a hook written in R.
source(system.file("examples", "keras_model_fn.R", package = "tpuestimatorr"))
run_r <- tpu_train(cfg, model_fn = digits_model_fn, model_dir = "models/digits-r",
                   hooks = function(event, info) {
                     if (event == "after_eval") message("R hook: accuracy ", round(info$metrics$accuracy, 4))
                   })
print(run_r)
