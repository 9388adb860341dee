#' Load and validate a job configuration
#'
#' Reads a YAML or JSON configuration file (or takes an R list with the same
#' sections), applies overrides, fills the defaults and validates the result with
#' the Python core (`tpuestimator.config.load_config()`), so R and Python accept
#' exactly the same configurations. Relative data paths are resolved against the
#' configuration file's folder (the working directory for a list).
#'
#' Overrides are named arguments whose names are dotted field paths, as in the
#' command line's `--set`: `train.max_steps = 1000L`, `params.learning_rate = 1e-3`,
#' `run.strategy = "cpu"`. Values are written as YAML/JSON scalars, so `100`
#' and `100L` both give the integer 100. Unnamed character arguments of the form
#' `"train.max_steps=1000"` are passed as they are.
#'
#' @param file_or_list A path to a `.yaml`/`.yml`/`.json` file, an R list of
#'   sections (`model`, `params`, `data`, `train`, `eval`, `export`, `run`,
#'   `debug`), or a `tpu_config` object (to apply more overrides).
#' @param ... Overrides, e.g. `train.max_steps = 100L`.
#' @param base_dir Folder that relative data paths are resolved against. Default:
#'   the configuration file's folder, or the working directory for a list.
#' @return A `tpu_config` object: the full configuration as a nested R list
#'   (defaults filled in, e.g. `cfg$train$batch_size`), remembering its source file
#'   and overrides.
#' @section Errors:
#' An invalid field signals a `tpuestimator_config_error` condition whose message
#' names the field, the value received and what is allowed; the condition's
#' `field`, `value` and `allowed` elements hold them.
#' @seealso [tpu_train()], [tpu_check()], [tpu_example()]
#' @examples
#' if (tpuestimator_available()) {
#'   path <- tpu_example("digits", dir = tempfile())
#'   cfg <- tpu_config(path, train.max_steps = 200L, params.learning_rate = 0.01)
#'   cfg$train$max_steps
#'   cfg
#' }
#' @export
tpu_config <- function(file_or_list, ..., base_dir = NULL) {
  overrides <- overrides_from_dots(...)
  if (inherits(file_or_list, "tpu_config")) {
    if (!length(overrides)) return(file_or_list)
    source <- config_source(file_or_list)
    return(load_tpu_config(source$source, c(source$overrides, overrides),
                           base_dir = base_dir %||% source$base_dir))
  }
  input <- config_input(file_or_list)
  load_tpu_config(input$source, overrides, base_dir = base_dir)
}

# A config file or list as given, checked as an R argument and not loaded: `tpu_config()` loads it,
# `tpu_train()` hands it to Python, which loads and validates it once for the job.
config_input <- function(file_or_list) {
  if (is.character(file_or_list)) {
    path <- as_string(file_or_list, "file_or_list")
    if (!file.exists(path)) {
      stop("`file_or_list` must be an existing YAML or JSON file or a list. Received: file_or_list = \"",
           path, "\" (no such file; check the path or the working directory ", getwd(), ").",
           call. = FALSE)
    }
    return(list(source = normalizePath(path), is_file = TRUE))
  }
  if (is.list(file_or_list)) {
    if (length(file_or_list) && is.null(names(file_or_list))) {
      arg_error("file_or_list", file_or_list, "a named list of sections (model, data, train, ...)")
    }
    return(list(source = file_or_list, is_file = FALSE))
  }
  arg_error("file_or_list", file_or_list, "a path to a YAML/JSON file, a named list or a tpu_config")
}

load_tpu_config <- function(source, overrides, base_dir = NULL) {
  base_dir <- as_nullable_path(base_dir, "base_dir")
  py_source <- if (is.character(source)) source else r_to_py_json(source)
  jc <- with_python(py_core()$load_config(py_source, as.list(overrides), base_dir = base_dir))
  raw <- py_to_r_json(jc$to_dict(), simplify = FALSE)
  structure(
    raw,
    class = "tpu_config",
    tpu_source = if (is.character(source)) source else NULL,
    tpu_overrides = as.character(overrides),
    tpu_base_dir = base_dir,
    tpu_validated = raw,
    tpu_job = jc  # the validated config itself: tpu_train() of this unchanged config validates nothing again
  )
}

# Dotted-name arguments -> "key=value" strings for load_config(overrides=).
overrides_from_dots <- function(...) {
  dots <- list(...)
  if (!length(dots)) return(character())
  nms <- names(dots) %||% rep("", length(dots))
  out <- character(length(dots))
  for (i in seq_along(dots)) {
    value <- dots[[i]]
    if (!nzchar(nms[[i]])) {
      if (is.character(value) && length(value) == 1L && !is.na(value)) {
        out[[i]] <- value  # "key=value", checked by Python like the command line's --set
        next
      }
      arg_error(paste0("..", i), value,
                "a named override such as `train.max_steps = 100L` (or a \"key=value\" string)")
    }
    out[[i]] <- paste0(nms[[i]], "=", override_value(value))
  }
  out
}

override_value <- function(value) {
  if (is.null(value)) return("null")
  if (is.factor(value)) value <- as.character(value)
  if (is.atomic(value) && length(value) == 1L && is.na(value)) return("null")
  r_to_json(value)
}

# A tpu_config's attributes: where it was loaded from and what it was validated as.
tpu_config_attributes <- c("tpu_source", "tpu_overrides", "tpu_base_dir", "tpu_validated", "tpu_job")

# What to hand to Python for a tpu_config: its file and overrides when unchanged (and `job`, the
# Python config it was validated as, while this session holds it), otherwise the edited list itself.
config_source <- function(cfg) {
  current <- unclass(cfg)
  for (a in tpu_config_attributes) attr(current, a) <- NULL
  base_dir <- attr(cfg, "tpu_base_dir")
  file <- attr(cfg, "tpu_source")
  unchanged <- identical(current, attr(cfg, "tpu_validated"))
  job <- attr(cfg, "tpu_job")
  # the Python config it was validated as, while this session holds it (not after saveRDS())
  job <- if (unchanged && !is.null(job) && !reticulate::py_is_null_xptr(job)) job
  if (!is.null(file) && unchanged) {
    return(list(source = file, overrides = attr(cfg, "tpu_overrides"), base_dir = base_dir,
                is_file = TRUE, job = job))
  }
  if (is.null(base_dir) && !is.null(file)) base_dir <- dirname(file)
  # Unset (null) fields are left out: Python fills its defaults again, and the schema does not
  # accept null for every field whose default is null.
  list(source = drop_nulls(current), overrides = character(), base_dir = base_dir, is_file = FALSE, job = job)
}

# Any accepted config form -> (source for Python, overrides, base_dir).
resolve_config <- function(config, overrides = character()) {
  if (inherits(config, "tpu_config")) {
    src <- config_source(config)
  } else if (is.character(config) || is.list(config)) {
    input <- config_input(config)  # not loaded here: Python loads it once, with the overrides
    src <- list(source = if (input$is_file) input$source else drop_nulls(input$source), overrides = character(),
                base_dir = NULL, is_file = input$is_file)
  } else {
    arg_error("cfg", config, "a tpu_config, a path to a YAML/JSON file or a named list")
  }
  src$overrides <- c(src$overrides, overrides)
  src$py_source <- if (src$is_file) src$source else r_to_py_json(src$source)
  src
}

#' @export
print.tpu_config <- function(x, ...) {
  cfg <- unclass(x)
  src <- attr(x, "tpu_source")
  cat("<tpu_config> ", cfg$name %||% "job", if (!is.null(src)) paste0(" (", src, ")"), "\n", sep = "")
  ov <- attr(x, "tpu_overrides")
  if (length(ov)) cat("overrides: ", paste(ov, collapse = ", "), "\n", sep = "")
  show <- cfg[intersect(c("model", "params", "data", "train", "eval", "export", "run"), names(cfg))]
  if (!is.null(show$data)) {
    keep <- intersect(c("format", "train", "eval", "manifest", "image", "features", "label", "vocabulary"),
                      names(show$data))
    show$data <- show$data[keep]
  }
  if (!is.null(show$run)) {
    show$run <- show$run[intersect(c("strategy", "model_dir", "runs_dir", "seed", "precision"), names(show$run))]
  }
  if (!is.null(show$export)) show$export <- show$export[intersect(c("enabled", "dir", "exporters"), names(show$export))]
  text <- yaml::as.yaml(drop_nulls(show), indent.mapping.sequence = TRUE)
  cat(text)
  invisible(x)
}

#' @export
as.list.tpu_config <- function(x, ...) {
  out <- unclass(x)
  for (a in tpu_config_attributes) attr(out, a) <- NULL
  out
}

drop_nulls <- function(x) {
  if (!is.list(x)) return(x)
  x <- x[!vapply(x, is.null, logical(1))]
  x[] <- lapply(x, drop_nulls)
  x
}
