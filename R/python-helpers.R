# Small Python helpers run through reticulate (no extra Python files needed).

python_helper_code <- '
import json as _json, math as _math

def _safe(value):
    if isinstance(value, dict):
        return {str(k): _safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if hasattr(value, "tolist") and callable(value.tolist):
        return _safe(value.tolist())
    if isinstance(value, float) and not _math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if hasattr(value, "__fspath__"):
        return str(value)
    return value

def to_json(value):
    return _json.dumps(_safe(value), allow_nan=False, default=str)

def from_json(text):
    return _json.loads(text)

def mro_names(exc):
    return [k.__name__ for k in type(exc).__mro__]

def attr_or_none(obj, name):
    return getattr(obj, name, None)

def array_from_r(buf, kind, shape, dtype):
    # reticulate 1.28 cannot hand R arrays to numpy 2 (binary version check); R sends the raw
    # bytes of its column-major vector instead.
    import numpy as np
    src = {"double": "<f8", "integer": "<i4"}[kind]
    a = np.frombuffer(bytes(buf), dtype=src)
    a = a.reshape(tuple(int(s) for s in shape), order="F")
    return np.ascontiguousarray(a.astype(dtype))

def strings_to_numpy(values):
    import numpy as np
    return np.asarray([str(v) for v in values], dtype=object)

def signature_params(fn):
    import inspect
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return []
'

py_helpers <- function() {
  helpers <- .globals$helpers
  if (is.null(helpers)) {
    builtins <- reticulate::import_builtins(convert = FALSE)
    helpers <- builtins$dict()
    builtins$exec(python_helper_code, helpers)
    .globals$helpers <- helpers
  }
  list(
    to_json = function(x) reticulate::py_to_r(helpers[["to_json"]](x)),
    from_json = function(text) helpers[["from_json"]](text),
    mro_names = function(exc) reticulate::py_to_r(helpers[["mro_names"]](exc)),
    attr = function(obj, name) helpers[["attr_or_none"]](obj, name),
    signature_params = function(fn) reticulate::py_to_r(helpers[["signature_params"]](fn)),
    array_from_r = function(buf, kind, shape, dtype) helpers[["array_from_r"]](buf, kind, shape, dtype),
    strings_to_numpy = function(values) helpers[["strings_to_numpy"]](values)
  )
}

# Python object -> R value through strict JSON (NaN/Inf -> NA). Lists stay lists when
# simplify = FALSE, so a configuration survives the round trip unchanged.
py_to_r_json <- function(x, simplify = TRUE) {
  text <- py_helpers()$to_json(x)
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
  py_helpers()$from_json(r_to_json(x))
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
    return(py_helpers()$strings_to_numpy(as.list(x)))
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
  py_helpers()$array_from_r(buf, kind, as.list(as.integer(shape)), dtype)
}
