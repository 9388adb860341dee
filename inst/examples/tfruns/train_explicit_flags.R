# The same with the flags passed explicitly, for a script whose flags are not all
# configuration fields: only the chosen ones go to tpu_train().
library(tpuestimatorr)

FLAGS <- tfruns::flags(
  tfruns::flag_numeric("learning_rate", 0.003),
  tfruns::flag_integer("max_steps", 300),
  tfruns::flag_string("note", "baseline", "For this script only: not a configuration field")
)

run <- tpu_train(tpu_example("digits"), flags = FLAGS[c("learning_rate", "max_steps")])
message("note: ", FLAGS$note, "; accuracy: ", format(run$metrics$accuracy, digits = 3))
