# Working inside tfruns::training_run(): write into tfruns's active run instead of a second one.

# The active tfruns run folder, or NULL (tfruns absent or no active run).
tfruns_active_run_dir <- function() {
  if (!requireNamespace("tfruns", quietly = TRUE)) return(NULL)
  active <- tryCatch(isTRUE(tfruns::is_run_active()), error = function(e) FALSE)
  if (!active) return(NULL)
  dir <- tryCatch(tfruns::run_dir(), error = function(e) NULL)
  if (is.null(dir) || !nzchar(dir)) return(NULL)
  normalizePath(dir, winslash = "/", mustWork = FALSE)
}

# TRUE when tfruns's training_run() would copy the files of `model_dir` into its run folder.
# After the script, training_run() copies every file of its artifacts dir (default: the
# working dir) that the script changed or added, except paths containing the run folder's
# name and packrat/ or gs/ paths; its utils::fileSnapshot() does not descend into hidden
# folders (rstudio/tfruns R/training_run.R, with_changed_file_copy()). So checkpoints are
# copied unless the model dir is outside the working dir, under a hidden folder (our default
# runs/.models/<run>), or has the run's name in its path.
tfruns_copies_model_dir <- function(model_dir, run_dir, artifacts_dir = getwd()) {
  if (is.null(model_dir) || is.null(run_dir)) return(FALSE)
  md <- normalizePath(model_dir, winslash = "/", mustWork = FALSE)
  base <- normalizePath(artifacts_dir, winslash = "/", mustWork = FALSE)
  if (!startsWith(md, paste0(sub("/$", "", base), "/"))) return(FALSE)
  rel <- substring(md, nchar(sub("/$", "", base)) + 2L)
  parts <- strsplit(rel, "/", fixed = TRUE)[[1]]
  if (any(startsWith(parts, "."))) return(FALSE)
  if (grepl(basename(run_dir), rel)) return(FALSE)
  !grepl("^(packrat|gs)/", rel)
}

tfruns_warn_model_dir <- function(model_dir, run_dir) {
  if (tfruns_copies_model_dir(model_dir, run_dir)) {
    warning("model_dir \"", model_dir, "\" is inside the working directory, so tfruns's training_run() ",
            "will copy its checkpoints and exports into the run folder ", run_dir, " as changed files. ",
            "Leave model_dir unset (the default is <runs folder>/.models/<run>, which tfruns skips) or ",
            "choose a folder outside the working directory.", call. = FALSE)
  }
}

# The flags of tfruns's active run: what the script declared with tfruns::flags() (which writes
# them to the run's flags.json at once), NULL outside training_run(). Read once per run: our
# own record adds the job's flags to that file, and a second tpu_train() in the same script
# must not take those for the user's.
tfruns_active_flags <- function() {
  dir <- tfruns_active_run_dir()
  if (is.null(dir)) return(NULL)
  cached <- .globals$tfruns_flags
  if (!is.null(cached) && identical(cached$dir, dir)) return(cached$flags)
  path <- file.path(dir, "tfruns.d", "flags.json")
  flags <- if (file.exists(path)) jsonlite::read_json(path, simplifyVector = FALSE) else list()
  flags <- flags[vapply(flags, function(v) !is.null(v) && !is.list(v), logical(1))]
  .globals$tfruns_flags <- list(dir = dir, flags = flags)
  flags
}
