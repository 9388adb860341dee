# A model function written in R for tpuestimatorr::tpu_train().
#
# tpuestimator calls it once, inside its distribution strategy's scope, with `params`: the
# configuration's params plus batch_size (per replica), global_batch_size, num_replicas,
# device and, when the data defines them, num_classes, vocabulary and image.
# It returns a ModelSpec: a Keras model (built through reticulate), a PER-EXAMPLE loss
# (reduction = NULL: tpuestimator averages over the global batch and masks eval padding),
# an optimizer and optional metrics.
#
# nolint start: commented_code_linter. (how to use this file)
#   source(system.file("examples", "keras_model_fn.R", package = "tpuestimatorr"))
#   run <- tpu_train(tpu_example("digits"), model_fn = digits_model_fn)
# nolint end

library(tpuestimatorr)

digits_model_fn <- function(params) {
  keras <- reticulate::import("keras")
  image <- params$image %||% list(height = 8L, width = 8L, channels = 1L)
  model <- keras$Sequential(list(
    keras$layers$Input(shape = list(as.integer(image$height), as.integer(image$width),
                                    as.integer(image$channels))),
    keras$layers$Conv2D(16L, 3L, padding = "same", activation = "relu"),
    keras$layers$Flatten(),
    keras$layers$Dense(64L, activation = "relu"),
    keras$layers$Dense(as.integer(params$num_classes))   # logits
  ))
  tpuestimator$ModelSpec(
    model = model,
    loss = keras$losses$SparseCategoricalCrossentropy(from_logits = TRUE, reduction = NULL),
    optimizer = keras$optimizers$Adam(params$learning_rate),
    metrics = list(accuracy = keras$metrics$SparseCategoricalAccuracy())
  )
}

`%||%` <- function(x, y) if (is.null(x)) y else x
