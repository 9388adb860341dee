# Argument coercion helpers, in the manner of the keras/tensorflow R packages. Each names the
# argument, shows the value and says what would be accepted.

arg_error <- function(name, value, expected) {
  shown <- tryCatch(paste(deparse(value, width.cutoff = 60L, nlines = 1L), collapse = ""),
                    error = function(e) "<unprintable>")
  stop(structure(
    class = c("tpuestimator_argument_error", "error", "condition"),
    list(message = paste0("`", name, "` must be ", expected, ". Received: ", name, " = ", shown, "."),
         call = NULL)
  ))
}

as_integer <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (length(x) != 1L || !is.numeric(x) || is.na(x) || !is.finite(x) || x != round(x)) {
    arg_error(name, x, "a single whole number (e.g. 100L)")
  }
  as.integer(x)
}

as_nullable_integer <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (is.null(x)) NULL else as_integer(x, name)
}

as_integer_vector <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (!is.numeric(x) || anyNA(x) || any(x != round(x))) {
    arg_error(name, x, "a vector of whole numbers")
  }
  as.integer(x)
}

as_string <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (!is.character(x) || length(x) != 1L || is.na(x) || !nzchar(x)) {
    arg_error(name, x, "a single non-empty string")
  }
  x
}

as_nullable_string <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (is.null(x)) NULL else as_string(x, name)
}

as_flag <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (!is.logical(x) || length(x) != 1L || is.na(x)) arg_error(name, x, "TRUE or FALSE")
  x
}

as_nullable_function <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (is.null(x)) return(NULL)
  if (!is.function(x) && !inherits(x, "python.builtin.object")) {
    arg_error(name, x, "NULL, an R function or a Python callable")
  }
  x
}

# A path as an absolute, normalised string (the folder need not exist).
as_path <- function(x, name = deparse(substitute(x))) {
  force(name)
  x <- as_string(path.expand(x), name)
  normalizePath(x, winslash = "/", mustWork = FALSE)
}

as_nullable_path <- function(x, name = deparse(substitute(x))) {
  force(name)
  if (is.null(x)) NULL else as_path(x, name)
}

`%||%` <- function(x, y) if (is.null(x)) y else x
