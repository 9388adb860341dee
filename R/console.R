# A quiet R console: TensorFlow's C++ log lines and "triggered tf.function
# retracing" warnings do not reach an R session; tpuestimator's progress lines still do.
# options(tpuestimatorr.tf_log = TRUE) (or tpuestimatorr.tf_logs), or TF_CPP_MIN_LOG_LEVEL
# set to 0 or 1 before the first call, shows TensorFlow's own logs again.

# TRUE when the user asked for TensorFlow's logs.
tf_logs_wanted <- function() {
  isTRUE(getOption("tpuestimatorr.tf_log", getOption("tpuestimatorr.tf_logs", FALSE))) ||
    Sys.getenv("TF_CPP_MIN_LOG_LEVEL") %in% c("0", "1")
}

# Called by every function that runs TensorFlow (training, tuning, evaluation, prediction,
# export) before Python does; the first call imports TensorFlow with its start-up lines
# silenced, later ones cost nothing.
quiet_python_console <- function() {
  if (tf_logs_wanted()) {
    if (isTRUE(.globals$quiet)) py_bridge()$quiet_tensorflow(FALSE)  # asked for after a quiet start
    .globals$quiet <- FALSE
    return(invisible(FALSE))
  }
  if (isTRUE(.globals$quiet)) return(invisible(TRUE))
  if (!nzchar(Sys.getenv("TF_CPP_MIN_LOG_LEVEL"))) Sys.setenv(TF_CPP_MIN_LOG_LEVEL = "2")
  py_bridge()$quiet_tensorflow(TRUE)
  .globals$quiet <- TRUE
  invisible(TRUE)
}
