# Data frames straight into canned models (docs/tables.md):
#   Rscript examples/R/tables.R [OUT_DIR]
library(tpuestimatorr)
args <- commandArgs(trailingOnly = TRUE)
out <- if (length(args)) args[[1]] else tempfile("tables-")

# mtcars regression: mpg from every other column (cyl as a factor: a categorical column)
cars <- transform(mtcars, cyl = factor(cyl))
run <- tpu_train(mpg ~ ., data = cars, model = "linear", train.max_steps = 500L,
                 model_dir = file.path(out, "mtcars"), runs_dir = file.path(out, "runs"))
run$metrics$rmse
head(predict(run, cars))

# iris classification: a factor label; predict() returns the class and its probabilities
fit <- tpu_train(iris, label = "Species", model = "dnn", train.max_steps = 500L,
                 params.hidden_units = list(16L), model_dir = file.path(out, "iris"),
                 runs_dir = file.path(out, "runs"))
fit$metrics$accuracy
predict(fit, iris[c(1, 51, 101), ])
