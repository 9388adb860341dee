# Python exceptions -> R conditions; errors raised inside R callbacks called from Python.

# Python class name -> R condition class. The first match along the exception's MRO wins.
python_error_classes <- c(
  ConfigError = "tpuestimator_config_error",
  DataError = "tpuestimator_data_error",
  NonFiniteError = "tpuestimator_nonfinite_error",
  TPUUnavailableError = "tpuestimator_tpu_error",
  ModelFnError = "tpuestimator_model_fn_error",
  CompatibilityError = "tpuestimator_compatibility_error",
  ModelDirLockedError = "tpuestimator_model_dir_locked_error",
  TrainingInterrupted = "tpuestimator_interrupted_error",
  DiskFullError = "tpuestimator_disk_full_error"
)

# Attributes copied from the Python exception onto the R condition, when present.
python_error_fields <- c("field", "value", "allowed", "source", "path", "record", "feature",
                         "step", "what", "last_good_checkpoint", "report_path",
                         "model_dir", "lock_path", "pid", "owner", "signal_name", "exit_code", "checkpoint",
                         "free_bytes")

#' Conditions signalled by tpuestimatorr
#'
#' Errors raised by the Python core reach R as conditions whose classes follow the
#' Python exception:
#'
#' | Python | R condition classes |
#' | --- | --- |
#' | `ConfigError` | `tpuestimator_config_error`, `tpuestimator_error`, `error`, `condition` |
#' | `DataError` | `tpuestimator_data_error`, `tpuestimator_error`, ... |
#' | `NonFiniteError` | `tpuestimator_nonfinite_error`, `tpuestimator_error`, ... |
#' | `TPUUnavailableError` | `tpuestimator_tpu_error`, `tpuestimator_error`, ... |
#' | `ModelFnError` | `tpuestimator_model_fn_error`, `tpuestimator_error`, ... |
#' | `ModelDirLockedError` | `tpuestimator_model_dir_locked_error`, `tpuestimator_error`, ... |
#' | `TrainingInterrupted` | `tpuestimator_interrupted_error`, `tpuestimator_error`, ... |
#' | `DiskFullError` | `tpuestimator_disk_full_error`, `tpuestimator_error`, ... |
#' | any other exception | `tpuestimator_python_error`, `tpuestimator_error`, ... |
#'
#' The message is the Python one, starting with the Python type
#' (`"ConfigError: ..."`). The condition also carries `python_type`,
#' `python_traceback` and the exception's attributes: `field`, `value`, `allowed`
#' for configuration errors; `path`, `record`, `feature` for data errors; `step`,
#' `what`, `last_good_checkpoint`, `report_path` for non-finite errors; `model_dir`,
#' `lock_path`, `pid` and `owner` (its `pid`, `host`, `started`, `command`) when another
#' job holds the model dir; `signal_name`, `exit_code`,
#' `step`, `checkpoint` for a training stopped by a signal; `path`, `what`, `free_bytes`,
#' `last_good_checkpoint` for a full disk.
#'
#' An error raised by an R model function, hook or progress callback while Python
#' is calling it comes back as a `tpuestimator_callback_error` (also a
#' `tpuestimator_error`) whose message contains the original R message; the
#' original condition is in its `parent` field.
#'
#' Argument errors of the R functions are `tpuestimator_argument_error`s.
#'
#' @name tpuestimator_conditions
#' @examples
#' if (tpuestimator_available()) {
#'   err <- tryCatch(
#'     tpu_config(list(model = "mlp", data = list(format = "mnst"))),
#'     tpuestimator_config_error = function(e) e
#'   )
#'   err$field
#'   conditionMessage(err)
#' }
NULL

# Evaluates `expr` (a call into Python) and turns failures into R conditions.
with_python <- function(expr) {
  saved <- .globals$callback_error
  .globals$callback_error <- NULL
  on.exit(.globals$callback_error <- saved, add = TRUE)
  tryCatch(
    expr,
    error = function(e) {
      if (inherits(e, c("tpuestimator_error", "tpuestimator_argument_error",
                        "tpuestimator_python_missing"))) {
        stop(e)
      }
      if (is_python_keyboard_interrupt(e)) r_interrupt()
      cb <- .globals$callback_error
      if (!is.null(cb)) stop(callback_condition(cb, e))
      cond <- python_condition(e)
      if (is.null(cond)) stop(e)
      stop(cond)
    }
  )
}

# Whether `e` is Python's KeyboardInterrupt leaving the job: a Ctrl-C that R took inside an R
# callback (the bridge raised it in Python, so R has no interrupt pending any more) reaches
# reticulate as an exception, which it would turn into an R error.
is_python_keyboard_interrupt <- function(e) {
  last <- tryCatch(reticulate::py_last_error(), error = function(err) NULL)
  !is.null(last) && identical(last$type, "KeyboardInterrupt") &&
    grepl("KeyboardInterrupt", conditionMessage(e), fixed = TRUE)
}

# R's own interrupt condition, as a Ctrl-C in R code signals it: an `interrupt` handler runs;
# without one, R returns to the top level.
r_interrupt <- function() {
  signalCondition(structure(class = c("interrupt", "condition"), list(message = "", call = NULL)))
  invokeRestart("abort")
}

# The R condition for an error of an R callback (model function, hook, progress).
callback_condition <- function(cb, python_error) {
  orig <- cb$condition
  msg <- conditionMessage(orig)
  classes <- setdiff(class(orig), c("error", "condition", "simpleError", "rlang_error",
                                    "Rcpp::exception", "C++Error"))
  structure(
    class = unique(c("tpuestimator_callback_error", classes, "tpuestimator_error", "error", "condition")),
    list(
      message = paste0("Error in the R ", cb$what, ": ", trimws(msg)),
      call = conditionCall(orig),
      parent = orig,
      python_message = trimws(conditionMessage(python_error))
    )
  )
}

# The R condition for a Python exception, or NULL when `e` did not come from Python.
python_condition <- function(e) {
  msg <- conditionMessage(e)
  last <- tryCatch(reticulate::py_last_error(), error = function(err) NULL)
  if (is.null(last) || is.null(last$type)) return(NULL)
  # reticulate 1.28 writes "<module>.<Type>: <value>"; py_last_error() has the bare type.
  if (!grepl(paste0(last$type, ":"), msg, fixed = TRUE) &&
      !grepl(substr(last$value %||% "", 1L, 80L), msg, fixed = TRUE)) {
    return(NULL)
  }
  exc <- attr(last, "exception")
  mro <- tryCatch(as.character(reticulate::py_to_r(py_bridge()$exception_classes(exc))),
                  error = function(err) last$type)
  specific <- unname(python_error_classes[intersect(mro, names(python_error_classes))])
  if (!length(specific)) specific <- "tpuestimator_python_error"
  fields <- list()
  if (!is.null(exc)) {
    for (name in python_error_fields) {
      # r_values: ints beyond R's 32-bit integers (free_bytes, a step, a record, a value)
      # arrive as doubles, not wrapped into negative R integers by reticulate
      value <- tryCatch(
        if (reticulate::py_has_attr(exc, name)) {
          reticulate::py_to_r(py_bridge()$r_values(reticulate::py_get_attr(exc, name)))
        },
        error = function(err) NULL
      )
      if (!is.null(value)) {
        fields[[name]] <- if (inherits(value, "python.builtin.object")) {
          tryCatch(reticulate::py_str(value), error = function(err) NULL)
        } else {
          value
        }
      }
    }
  }
  structure(
    class = unique(c(specific[1], "tpuestimator_error", "error", "condition")),
    c(
      list(
        message = paste0(last$type, ": ", sub("\n+$", "", last$value %||% msg)),
        call = NULL,
        python_type = last$type,
        python_traceback = paste(last$traceback, collapse = "")
      ),
      fields
    )
  )
}

# Wraps an R function that Python will call (through the bridge's `r_callback`), so an R error
# inside it is remembered and re-signalled in R with its own message once the Python call
# unwinds. The bridge runs jobs with R's interrupts suspended (its interrupts.py: R taking a
# Ctrl-C inside reticulate's own call machinery broke the unwind); they are allowed again here,
# inside the tryCatch, so a long R callback stays interruptible: the Ctrl-C returns
# `r_interrupt_marker`, which `r_callback` raises as Python's KeyboardInterrupt, and the job
# records the run "interrupted" as when the Ctrl-C lands in Python code.
wrap_r_callback <- function(f, what) {
  force(f)
  force(what)
  function(...) {
    tryCatch(
      withCallingHandlers(
        allowInterrupts(f(...)),
        error = function(e) {
          if (is.null(.globals$callback_error)) {
            # A Python error raised by Python code the R function called keeps its mapping.
            cond <- if (inherits(e, "Rcpp::exception")) python_condition(e) %||% e else e
            .globals$callback_error <- list(condition = cond, what = what)
          }
        }
      ),
      interrupt = function(e) r_interrupt_marker
    )
  }
}

# What an interrupted R callback returns; the bridge's R_INTERRUPT_MARKER is the same text.
r_interrupt_marker <- "tpuestimatorr: R interrupt (Ctrl-C)"
