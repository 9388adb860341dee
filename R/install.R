#' Install the tpuestimator Python package
#'
#' Creates a Python virtualenv (with [reticulate::virtualenv_create()], upgrading
#' only pip in it) and pip-installs the `tpuestimator` Python package and its
#' requirements into it, from a local source
#' folder (a checkout holding `pyproject.toml`) or from a package index (a version
#' this R package supports, see [tpuestimatorr-package]).
#' Restart R afterwards; the package then uses this virtualenv automatically
#' (unless `TPUESTIMATORR_PYTHON` or `RETICULATE_PYTHON` points elsewhere).
#'
#' @param envname Name of (or path to) the virtualenv. Default `"r-tpuestimator"`.
#' @param extra Extras of the Python package to install: the TensorFlow build,
#'   one of `"tensorflow"` (the plain build), `"cpu"` (`tensorflow-cpu`, smaller),
#'   `"gpu"` (`tensorflow[and-cuda]`) or `"tpu"` (`tensorflow-tpu`), plus any of
#'   `"beam"`, `"dev"`, `"r"`. Without a TensorFlow build (`NULL`, or say
#'   `"beam"` alone) `"tensorflow"` is added: the Python package leaves
#'   TensorFlow to an extra.
#' @param path Local source folder of the Python package (holding
#'   `pyproject.toml`). Default: the source checkout this R package was installed
#'   from, when it can be found; otherwise the package is taken from the index.
#'   Use `path = NA` to force the index.
#' @param python Python executable used to create the virtualenv (3.10 or 3.11:
#'   reticulate 1.28 cannot use newer ones). Default: reticulate's choice.
#' @param editable Install the local source in editable mode (`pip install -e`).
#' @param ... Further arguments passed to [reticulate::virtualenv_install()]
#'   (e.g. `pip_options`).
#' @return The path of the virtualenv's Python executable, invisibly.
#' @seealso [tpuestimator_available()]
#' @examples
#' \dontrun{
#' install_tpuestimator()                     # CPU/GPU TensorFlow from the index
#' install_tpuestimator(extra = "tpu")        # on a Cloud TPU VM
#' install_tpuestimator(path = "~/src/tpuestimator", extra = "cpu")
#' }
#' @export
install_tpuestimator <- function(envname = "r-tpuestimator", extra = NULL, path = NULL,
                                 python = NULL, editable = FALSE, ...) {
  envname <- as_string(envname, "envname")
  extra <- tpuestimator_extras(extra)
  if (is.null(path)) {
    path <- find_python_source()
  } else if (identical(path, NA)) {
    path <- NULL
  } else {
    path <- as_string(path, "path")
    if (!file.exists(file.path(path, "pyproject.toml"))) {
      stop("`path` must be a folder holding the tpuestimator Python package's pyproject.toml. ",
           "Received: path = \"", path, "\". Point it at a tpuestimator checkout, or use path = NA ",
           "to install from the package index.", call. = FALSE)
    }
    path <- normalizePath(path)
  }

  if (!reticulate::virtualenv_exists(envname)) {
    # Without reticulate's default packages (numpy, setuptools and wheel at their newest): numpy
    # comes with tpuestimator's requirements at the versions they declare, in the one resolver
    # run below, and pip builds a source folder in an isolated environment with the setuptools
    # pyproject.toml asks for. Only pip is upgraded first.
    args <- list(envname = envname, packages = FALSE)
    if (!is.null(python)) args$python <- as_string(python, "python")
    do.call(reticulate::virtualenv_create, args)
    reticulate::virtualenv_install(envname, packages = "pip", ignore_installed = FALSE, ...)
  }
  suffix <- if (length(extra)) paste0("[", paste(extra, collapse = ","), "]") else ""
  spec <- if (is.null(path)) {
    versions <- supported_python_versions
    paste0("tpuestimator", suffix, ">=", versions[["min"]], ",<", versions[["below"]])
  } else {
    paste0(path, suffix)
  }
  if (!is.null(path) && isTRUE(editable)) spec <- c("-e", spec)
  reticulate::virtualenv_install(envname, packages = spec, ignore_installed = FALSE, ...)

  python_exe <- reticulate::virtualenv_python(envname)
  message("Installed tpuestimator into ", envname, " (", python_exe, ").\n",
          "Restart R to use it; or set TPUESTIMATORR_PYTHON=", python_exe, ".")
  invisible(python_exe)
}

# The Python package's source folder next to this R package's source, if any.
find_python_source <- function() {
  candidates <- c(
    Sys.getenv("TPUESTIMATOR_SOURCE", ""),
    getwd(),
    dirname(getwd())
  )
  desc <- tryCatch(utils::packageDescription("tpuestimatorr"), error = function(e) NULL)
  if (!is.null(desc) && !is.null(desc$RemoteUrl)) candidates <- c(candidates, desc$RemoteUrl)
  for (cand in candidates[nzchar(candidates)]) {
    if (file.exists(file.path(cand, "pyproject.toml")) &&
        dir.exists(file.path(cand, "python", "tpuestimator"))) {
      return(normalizePath(cand))
    }
  }
  NULL
}

#' Is the tpuestimator Python package available?
#'
#' `TRUE` when reticulate finds a Python with the `tpuestimator` package
#' (this starts Python if it is not running yet). Use it to guard examples and
#' code that needs Python.
#'
#' @return A single logical.
#' @examples
#' tpuestimator_available()
#' @export
tpuestimator_available <- function() {
  isTRUE(tryCatch(reticulate::py_module_available("tpuestimator"), error = function(e) FALSE))
}

#' The Python executable tpuestimatorr uses
#'
#' The Python that reticulate runs (when Python is already started), otherwise
#' `TPUESTIMATORR_PYTHON`, `RETICULATE_PYTHON`, or the `r-tpuestimator`
#' virtualenv's Python. Does not start Python. Used to launch TensorBoard and
#' the `tpuestimator` command line in a separate process.
#'
#' @return A path, or `NULL` when none is known.
#' @examples
#' tpuestimator_python()
#' @export
tpuestimator_python <- function() {
  if (reticulate::py_available(initialize = FALSE)) {
    return(reticulate::py_config()$python)
  }
  for (value in c(package_python_env(), Sys.getenv("RETICULATE_PYTHON", ""))) {
    # Not normalizePath(): it resolves the venv's symlink to the base interpreter.
    if (nzchar(value) && file.exists(value)) return(absolute_path(value))
  }
  venv <- tryCatch(
    if (reticulate::virtualenv_exists("r-tpuestimator")) reticulate::virtualenv_python("r-tpuestimator"),
    error = function(e) NULL
  )
  if (!is.null(venv)) return(venv)
  cfg <- tryCatch(reticulate::py_discover_config(), error = function(e) NULL)
  if (!is.null(cfg)) cfg$python else NULL
}

absolute_path <- function(path) {
  path <- path.expand(path)
  if (grepl("^(/|[A-Za-z]:)", path)) path else file.path(getwd(), path)
}

# The extras to install: those asked for, with the plain TensorFlow build added when none of
# the builds is among them (TensorFlow is an extra of the Python package).
tpuestimator_extras <- function(extra) {
  builds <- c("tensorflow", "cpu", "gpu", "tpu")
  allowed <- c(builds, "beam", "dev", "r")
  extra <- if (is.null(extra)) character() else as.character(extra)
  bad <- setdiff(extra, allowed)
  if (length(bad) || anyNA(extra)) {
    stop("`extra` must be NULL or some of ", paste(dQuote(allowed, FALSE), collapse = ", "),
         ". Received: extra = ", deparse(extra), ".", call. = FALSE)
  }
  if (sum(extra %in% builds) > 1L) {
    stop("`extra` names more than one TensorFlow build (", paste(extra[extra %in% builds], collapse = ", "),
         "): choose one of ", paste(dQuote(builds, FALSE), collapse = ", "), ".", call. = FALSE)
  }
  if (!any(extra %in% builds)) extra <- c("tensorflow", extra)
  unique(extra)
}
