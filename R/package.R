#' tpuestimatorr: R interface to tpuestimator
#'
#' Train, evaluate, predict with and export TensorFlow models on CPU, GPU and TPU
#' from R. The work is done by the `tpuestimator` Python package, reached through
#' reticulate; runs are recorded in tfruns's run-folder format.
#'
#' @section Getting started:
#' ```
#' library(tpuestimatorr)
#' install_tpuestimator()          # once: a virtualenv with the Python package
#' cfg <- tpu_config(tpu_example("digits"), train.max_steps = 300L)
#' run <- tpu_train(cfg)
#' run
#' tpu_ls_runs()
#' ```
#'
#' @section Choosing the Python:
#' Set the environment variable `TPUESTIMATORR_PYTHON` to a Python executable
#' (for example a project's `.venv/bin/python`) before loading the package; it
#' is forwarded to reticulate as `RETICULATE_PYTHON`. Without it, the virtualenv
#' made by [install_tpuestimator()] (`r-tpuestimator`) is used when it exists.
#'
#' @section Python versions:
#' This version of the R package works with the `tpuestimator` Python package
#' from `r supported_python_versions[["min"]]` up to, not including,
#' `r supported_python_versions[["below"]]`. The first use of Python checks
#' `tpuestimator.__version__` and stops with a `tpuestimator_version_error`
#' (naming both versions) when it is outside that range; [install_tpuestimator()]
#' installs a matching version.
#'
#' @section Package options:
#' * `tfruns.runs_dir`: the runs folder, as in tfruns (default `"runs"`).
#' * `tpuestimatorr.verbose`: default of `verbose` in [tpu_train()].
#' * `tpuestimatorr.tf_log`: `TRUE` shows TensorFlow's own log lines (its C++
#'   start-up lines, Python warnings), which are kept off the console by default
#'   (as is the environment variable `TF_CPP_MIN_LOG_LEVEL` set to 0 or 1).
#'
#' @seealso [tpu_train()], [tpu_ls_runs()], [tpu_estimator()] for users of tfestimators.
#' @keywords internal
"_PACKAGE"

# Internal state: the version-checked core module, the bridge module (tpuestimatorr_bridge),
# the TensorBoard server, the error an R callback raised while Python was calling it.
.globals <- new.env(parent = emptyenv())
.globals$core <- NULL
.globals$bridge <- NULL
.globals$tensorboard <- NULL
.globals$callback_error <- NULL
.globals$tfruns_flags <- NULL  # tfruns_active_flags(): the flags of the active tfruns run, read once
.globals$module <- NULL  # the `tpuestimator` object, made at its first use
.globals$virtualenv_checked <- FALSE

#' The tpuestimator Python module
#'
#' The `tpuestimator` Python module, imported lazily: loading the R package does
#' not start Python; the first use of `tpuestimator$...` does. Use it to reach
#' Python API that has no R wrapper, e.g. `tpuestimator$ModelSpec(...)` inside an R
#' model function.
#'
#' @format A reticulate Python module proxy.
#' @examples
#' if (tpuestimator_available()) {
#'   tpuestimator$config$schema_path()
#' }
#' @export
tpuestimator <- NULL

.onLoad <- function(libname, pkgname) {
  configure_python()
  # The virtualenv is chosen when reticulate loads, before anything can start Python.
  if (isNamespaceLoaded("reticulate")) configure_virtualenv() else
    setHook(packageEvent("reticulate", "onLoad"), function(...) configure_virtualenv())
  register_foreign_methods()  # names.R: train()/evaluate()/export_savedmodel() beside tensorflow
  # `tpuestimator` is made at its first use (an active binding): loading reticulate (about a
  # second of CPU, Matrix and Rcpp with it) waits until Python is needed, so library() is fast.
  ns <- environment(sys.function())
  if (exists("tpuestimator", envir = ns, inherits = FALSE)) rm("tpuestimator", envir = ns)
  makeActiveBinding("tpuestimator", function() tpuestimator_module(), ns)
  invisible()
}

# The `tpuestimator` object: with Python not started yet, reticulate only records the import;
# with Python already running (e.g. R embedded in Python through rpy2) the import happens now
# and may fail: then a stand-in that says what to do when used.
tpuestimator_module <- function() {
  module <- .globals$module
  if (!is.null(module)) return(module)
  configure_virtualenv()
  module <- tryCatch(
    reticulate::import(
      "tpuestimator",
      delay_load = list(
        priority = 5,
        environment = "r-tpuestimator",
        on_load = function() py_core(),
        on_error = function(e) {
          stop(python_missing_message(conditionMessage(e)), call. = FALSE)
        }
      )
    ),
    error = function(e) structure(list(reason = conditionMessage(e)), class = "tpuestimator_missing_module")
  )
  .globals$module <- module
  module
}

#' @export
`$.tpuestimator_missing_module` <- function(x, name) {
  stop(python_missing_message(.subset2(x, "reason")), call. = FALSE)
}

#' @export
print.tpuestimator_missing_module <- function(x, ...) {
  cat("<tpuestimator Python module: not available>\n", python_missing_message(.subset2(x, "reason")), "\n", sep = "")
  invisible(x)
}

.onUnload <- function(libpath) {
  try(tensorboard_stop(), silent = TRUE)  # tensorboard.R
  invisible()
}

# Forwards TPUESTIMATORR_PYTHON to reticulate. Never starts Python, nor loads reticulate
# (library() stays fast): Python cannot be running through reticulate before it is loaded.
configure_python <- function() {
  python <- package_python_env()
  if (nzchar(python)) {
    if (isNamespaceLoaded("reticulate") && reticulate::py_available(initialize = FALSE)) {
      current <- normalizePath(reticulate::py_config()$python, mustWork = FALSE)
      if (!identical(current, normalizePath(python, mustWork = FALSE))) {
        warning("TPUESTIMATORR_PYTHON=", python, " is ignored: Python is already running (",
                current, "). Restart R to switch.", call. = FALSE)
      }
      return(invisible())
    }
    Sys.setenv(RETICULATE_PYTHON = python)
  }
  invisible()
}

# Without TPUESTIMATORR_PYTHON or RETICULATE_PYTHON: the virtualenv made by
# install_tpuestimator(), chosen at the first use of Python (py_core(), `tpuestimator`).
configure_virtualenv <- function() {
  if (isTRUE(.globals$virtualenv_checked)) return(invisible())
  .globals$virtualenv_checked <- TRUE
  if (nzchar(package_python_env()) || nzchar(Sys.getenv("RETICULATE_PYTHON", "")) ||
        reticulate::py_available(initialize = FALSE)) {
    return(invisible())
  }
  exists <- tryCatch(reticulate::virtualenv_exists("r-tpuestimator"), error = function(e) FALSE)
  if (isTRUE(exists)) try(reticulate::use_virtualenv("r-tpuestimator", required = FALSE), silent = TRUE)
  invisible()
}

# TPUESTIMATORR_PYTHON, or TPUESTIMATOR_PYTHON (the Python side's name) as a fallback.
package_python_env <- function() {
  python <- Sys.getenv("TPUESTIMATORR_PYTHON", "")
  if (!nzchar(python)) python <- Sys.getenv("TPUESTIMATOR_PYTHON", "")
  python
}

python_missing_message <- function(detail) {
  paste0(
    "The tpuestimator Python package could not be loaded (", trimws(detail), ").\n",
    "Run install_tpuestimator() to create the 'r-tpuestimator' virtualenv, or set ",
    "TPUESTIMATORR_PYTHON to a Python that has tpuestimator installed, then restart R."
  )
}

# The tpuestimator Python versions this R package works with: from `min` up to, not
# including, `below`. Checked once, at the first use of Python (py_core()).
supported_python_versions <- c(min = "0.1.0", below = "0.2.0")

# Stops with a tpuestimator_version_error unless `version` (a tpuestimator.__version__
# string such as "0.1.0" or "0.1.0.dev3") is in `supported`. Returns `version` invisibly.
check_tpuestimator_version <- function(version, supported = supported_python_versions, python = NULL) {
  numeric <- regmatches(version, regexpr("^[0-9]+(\\.[0-9]+)*", version))
  parsed <- if (length(numeric) == 1L) package_version(numeric) else NULL
  ok <- !is.null(parsed) && parsed >= package_version(supported[["min"]]) &&
    parsed < package_version(supported[["below"]])
  if (ok) return(invisible(version))
  where <- if (is.null(python)) "" else paste0(" (", python, ")")
  message <- paste0(
    "tpuestimatorr ", utils::packageVersion("tpuestimatorr"), " needs the tpuestimator Python package ",
    ">= ", supported[["min"]], " and < ", supported[["below"]], ", but the Python in use", where,
    " has tpuestimator ", if (length(version) == 1L && !is.na(version)) version else "(unknown version)", ".\n",
    "Run install_tpuestimator() to install a matching version (or point TPUESTIMATORR_PYTHON at a ",
    "Python that has one), then restart R."
  )
  stop(structure(
    class = c("tpuestimator_version_error", "tpuestimator_error", "error", "condition"),
    list(message = message, call = NULL, version = version, supported = supported)
  ))
}

# The tpuestimator root module (convert = FALSE), imported and version-checked once. Missing
# Python or package: tpuestimator_python_missing; wrong version: tpuestimator_version_error.
py_core <- function() {
  core <- .globals$core
  if (!is.null(core)) return(core)
  configure_virtualenv()
  core <- tryCatch(
    reticulate::import("tpuestimator", convert = FALSE),
    error = function(e) {
      stop(structure(
        class = c("tpuestimator_python_missing", "error", "condition"),
        list(message = python_missing_message(conditionMessage(e)), call = NULL)
      ))
    }
  )
  version <- tryCatch(reticulate::py_to_r(reticulate::py_get_attr(core, "__version__")),
                      error = function(e) NA_character_)
  check_tpuestimator_version(version, python = reticulate::py_config()$python)
  .globals$core <- core
  # the bridge arms Python's exit handlers for R's exit (bridge.R), also for a session that
  # uses only the `tpuestimator` module; a bridge that cannot load says so when it is needed
  tryCatch(py_bridge(), error = function(e) NULL)
  core
}
