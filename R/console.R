# A quiet R console: TensorFlow's C++ log lines and "triggered tf.function
# retracing" warnings do not reach an R session; tpuestimator's progress lines still do.
# options(tpuestimatorr.tf_logs = TRUE) shows TensorFlow's own logs again.

# Called by tpu_train() (and so tpu_tuning_run()) before Python trains.
quiet_python_console <- function() {
  if (isTRUE(getOption("tpuestimatorr.tf_logs", FALSE))) return(invisible(FALSE))
  if (!nzchar(Sys.getenv("TF_CPP_MIN_LOG_LEVEL"))) Sys.setenv(TF_CPP_MIN_LOG_LEVEL = "2")
  py_bridge()$quiet_tensorflow(TRUE)
  invisible(TRUE)
}
