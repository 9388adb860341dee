# A training script for tfruns (docs/tuning.md, "Tuning with tfruns"):
#   tfruns::training_run("train.R")
#   tfruns::tuning_run("train.R", flags = list(learning_rate = c(0.001, 0.01)))
# Its flags are named like configuration fields (learning_rate is params.learning_rate,
# max_steps is train.max_steps), so tpu_train() applies them itself: see ?tpu_train, `flags`.
library(tpuestimatorr)

FLAGS <- tfruns::flags(
  tfruns::flag_numeric("learning_rate", 0.003, "Adam's learning rate (params.learning_rate)"),
  tfruns::flag_integer("max_steps", 300, "Training steps (train.max_steps)")
)

# Inside training_run() the record goes into tfruns's run folder, and each run trains a new
# model in runs/.models/<run> (which tfruns does not copy).
run <- tpu_train(tpu_example("digits"))
run$metrics$accuracy
