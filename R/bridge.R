# The Python side of the package: inst/python/tpuestimatorr_bridge (installed under
# system.file("python")), imported at first use after the core's version check. Every call
# into the core other than its public API (tpuestimator.run_job, tpuestimator.load_config)
# goes through it, so a change of the core's internals is adapted there, in one place.
py_bridge <- function() {
  bridge <- .globals$bridge
  if (!is.null(bridge)) return(bridge)
  py_core()  # refuses an unsupported tpuestimator before anything else runs
  path <- system.file("python", package = "tpuestimatorr")
  if (!nzchar(path) || !dir.exists(file.path(path, "tpuestimatorr_bridge"))) {
    stop("The tpuestimatorr installation lacks its Python helpers (python/tpuestimatorr_bridge): ",
         "reinstall the R package.", call. = FALSE)
  }
  bridge <- reticulate::import_from_path("tpuestimatorr_bridge", path = path, convert = FALSE)
  .globals$bridge <- bridge
  arm_python_exit(bridge)
  bridge
}

# reticulate 1.28 never finalizes Python: when R quits, Python's exit handlers do not run, and
# every session that trained left AutoGraph's generated files in the temporary folder
# (process_exit.py). An R finalizer run at R's exit runs them instead, once.
arm_python_exit <- function(bridge) {
  bridge$arm_exit_handlers()
  reg.finalizer(.globals, function(globals) run_python_exit(), onexit = TRUE)
  invisible()
}

run_python_exit <- function() {
  bridge <- .globals$bridge
  if (is.null(bridge)) return(invisible(FALSE))
  invisible(tryCatch(reticulate::py_to_r(bridge$run_exit_handlers()), error = function(e) FALSE))
}

# Python object -> R value through strict JSON (NaN/Inf -> NA). Lists stay lists when
# simplify = FALSE, so a configuration survives the round trip unchanged.
py_to_r_json <- function(x, simplify = TRUE) {
  text <- reticulate::py_to_r(py_bridge()$to_json(x))
  out <- jsonlite::fromJSON(text, simplifyVector = simplify, simplifyDataFrame = simplify,
                            simplifyMatrix = simplify)
  if (simplify) null_to_na(out) else out
}

null_to_na <- function(x) {
  if (is.list(x) && !is.data.frame(x)) {
    x[] <- lapply(x, function(v) if (is.null(v)) NA else null_to_na(v))
  }
  x
}

# R list -> Python dict/list through strict JSON: length-1 vectors become scalars, unnamed
# lists become lists, NULL and NA become None.
r_to_py_json <- function(x) {
  py_bridge()$from_json(r_to_json(x))
}

r_to_json <- function(x) {
  as.character(jsonlite::toJSON(x, auto_unbox = TRUE, null = "null", na = "null",
                                digits = NA, POSIXt = "ISO8601", factor = "string"))
}

# An R vector/matrix/array -> numpy array of `dtype`, same indexing (x[i, j] is a[i-1, j-1]).
# Goes through the raw bytes: reticulate 1.28's own conversion refuses numpy >= 2.
r_to_numpy <- function(x, dtype = NULL) {
  shape <- dim(x) %||% length(x)
  if (is.factor(x)) x <- as.character(x)
  if (is.character(x)) {
    if (!is.null(dim(x))) stop("character arrays are not supported; pass a character vector", call. = FALSE)
    return(py_bridge()$strings_to_numpy(as.list(x)))
  }
  if (is.logical(x)) x <- array(as.integer(x), dim = dim(x) %||% length(x))
  if (is.integer(x)) {
    kind <- "integer"
    buf <- writeBin(as.vector(x), raw(), size = 4L, endian = "little")
    dtype <- dtype %||% "int64"
  } else if (is.double(x)) {
    kind <- "double"
    buf <- writeBin(as.vector(x), raw(), size = 8L, endian = "little")
    dtype <- dtype %||% "float32"
  } else {
    stop("cannot convert an object of class ", class(x)[[1]], " to a numpy array", call. = FALSE)
  }
  py_bridge()$array_from_r(buf, kind, as.list(as.integer(shape)), dtype)
}
