#' Tuning runs: one training per combination of flag values
#'
#' Trains `cfg` once per combination of the `flags` values, as tfruns's
#' `tuning_run()` does: each combination is a separate run with its own new
#' model dir (under `<runs_dir>/.models/`), so no run continues another's
#' checkpoint, and its own run folder (tagged with the `tuning_run` property).
#' Pick the best with [tpu_ls_runs()], e.g.
#' `tpu_ls_runs(order = "eval_loss", decreasing = FALSE)`. The same as the command
#' line's `tpuestimator tune CONFIG --grid params.learning_rate=1e-3,3e-3`.
#'
#' @param cfg A configuration: a YAML/JSON file, a list or a [tpu_config()].
#' @param flags A named list of flags and their values, e.g.
#'   `list(params.learning_rate = c(1e-3, 3e-3))` or `list(learning_rate = c(1e-3, 3e-3))`:
#'   the names as `tpu_train(flags = )` reads them (a field's dotted path or a short
#'   name). Every combination is trained, the first flag varying fastest
#'   (`expand.grid()` order). A flag that names no field is an error before
#'   anything is trained.
#' @param sample Train only this random fraction (in (0, 1]) of the
#'   combinations. `NULL` or `1`: all of them.
#' @param runs_dir Folder of run records (default: the configuration's
#'   `run.runs_dir`, `"runs"`); the model dirs go under its `.models/`.
#' @param verbose Print a line per run and the progress lines.
#' @param ... Configuration overrides applied to every run (`train.max_steps = 300`).
#' @param model_fn,hooks,progress,export As in [tpu_train()], for every run.
#' @return A data frame of class `tpu_runs_df` (see [tpu_ls_runs()]) with the runs
#'   trained, best (lowest `eval_loss`) first when an evaluation loss was
#'   recorded. A combination whose training fails is reported and skipped.
#' @seealso [tpu_train()], [tpu_ls_runs()], [tpu_compare_runs()]
#' @examples
#' \dontrun{
#' runs <- tpu_tuning_run("digits.yaml",
#'                        flags = list(params.learning_rate = c(1e-3, 3e-3, 1e-2)))
#' runs[, c("run_dir", "eval_loss", "flag_learning_rate")]
#' }
#' @export
tpu_tuning_run <- function(cfg, flags, sample = NULL, runs_dir = NULL,
                           verbose = getOption("tpuestimatorr.verbose", TRUE), ..., model_fn = NULL,
                           hooks = NULL, progress = NULL, export = TRUE) {
  verbose <- as_flag(verbose, "verbose")
  export <- as_flag(export, "export")
  if (!is.list(flags) || !length(flags) || is.null(names(flags)) || any(!nzchar(names(flags)))) {
    arg_error("flags", flags, "a named list of flag values, e.g. list(params.learning_rate = c(1e-3, 3e-3))")
  }
  if (any(lengths(flags) == 0L)) {
    stop("`flags` has a flag with no values: ", paste(names(flags)[lengths(flags) == 0L], collapse = ", "),
         ". Give each flag one or more values.", call. = FALSE)
  }
  if (!is.null(sample)) {
    if (!is.numeric(sample) || length(sample) != 1L || is.na(sample) || sample <= 0 || sample > 1) {
      arg_error("sample", sample, "a fraction in (0, 1], e.g. sample = 0.3")
    }
  }
  if (is.character(model_fn)) {
    cfg <- tpu_config(cfg, model = as_string(model_fn, "model_fn"))
    model_fn <- NULL
  }
  model_fn <- as_nullable_function(model_fn, "model_fn")
  progress <- as_nullable_function(progress, "progress")
  runs_dir <- as_nullable_path(runs_dir, "runs_dir")
  src <- resolve_config(cfg, overrides_from_dots(...))
  quiet_python_console()  # defined in console.R
  # One tuning for R and the command line: tpuestimator.jobs.tune (the model dirs, the
  # tuning_run/tuning_index properties written atomically, failed combinations skipped).
  args <- c(list(src$py_source, r_to_json(lapply(flags, function(v) if (is.list(v)) v else as.list(v))),
                 overrides = as.list(src$overrides), sample = sample, runs_dir = runs_dir, export = export,
                 on_run = py_bridge()$r_callback(reticulate::r_to_py(wrap_r_callback(function(i, n, label) {
                   if (verbose) message(sprintf("tuning run %d/%d: %s", as.integer(i), as.integer(n), label))
                 }, "tuning progress"), convert = TRUE))),
            job_callbacks(model_fn, as_hook_list(hooks), progress, verbose))
  trained <- as.character(reticulate::py_to_r(with_python(do.call(py_bridge()$tuning_run, args))))
  trained <- normalizePath(trained, winslash = "/")
  all_runs <- tpu_ls_runs(unique(dirname(trained))[[1]])
  out <- all_runs[normalizePath(all_runs$run_dir, winslash = "/") %in% trained, , drop = FALSE]
  if ("eval_loss" %in% names(out)) out <- out[order(out$eval_loss, na.last = TRUE), , drop = FALSE]
  rownames(out) <- NULL
  class(out) <- c("tpu_runs_df", "data.frame")
  out
}
