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
#' `cfg` may also be a data frame (with `label`) or a formula with `data`, as
#' [tpu_train()] takes them: the table is written once (under
#' `<runs_dir>/.models/table-<label>-<digest>`), then each combination trains
#' its own canned model (`model`), recorded in `runs_dir` (default `runs/` of
#' the working folder), so [tpu_ls_runs()] and `tfruns::compare_runs()` compare
#' them. The canned models' short flag names work (`learning_rate`,
#' `hidden_units`, `optimizer`, ...), as does `model` itself.
#'
#' @param cfg A configuration: a YAML/JSON file, a list or a [tpu_config()]; or
#'   a data frame or formula (see above).
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
#' @param data,label,model,feature_columns,missing,split,task,early_stopping With a
#'   data frame or formula as `cfg`: as in [tpu_train()] (every combination stops
#'   early on the held-out rows by default, and is compared on its best
#'   evaluation). With a configuration, `early_stopping` must stay `TRUE`: the
#'   configuration's `eval.early_stopping` sets the rule.
#' @return A data frame of class `tpu_runs_df` (see [tpu_ls_runs()]) with the runs
#'   trained, best (lowest `eval_loss`) first when an evaluation loss was
#'   recorded. A combination whose training fails is reported and skipped.
#' @seealso [tpu_train()], [tpu_ls_runs()], [tpu_compare_runs()]
#' @examples
#' \dontrun{
#' runs <- tpu_tuning_run("digits.yaml",
#'                        flags = list(params.learning_rate = c(1e-3, 3e-3, 1e-2)))
#' runs[, c("run_dir", "eval_loss", "flag_learning_rate")]
#' tables <- tpu_tuning_run(mpg ~ ., data = mtcars, model = "linear",
#'                          flags = list(learning_rate = c(0.01, 0.1)), train.max_steps = 200L)
#' }
#' @export
tpu_tuning_run <- function(cfg, flags, sample = NULL, runs_dir = NULL,
                           verbose = getOption("tpuestimatorr.verbose", TRUE), ..., model_fn = NULL,
                           hooks = NULL, progress = NULL, export = TRUE, data = NULL, label = NULL, model = NULL,
                           feature_columns = NULL, missing = NULL, split = 0.2, task = NULL,
                           early_stopping = TRUE) {
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
  if (inherits(cfg, "formula") || is.data.frame(cfg)) {  # a table (tables.R), as tpu_train() takes it
    if (!is.null(model_fn)) arg_error("model_fn", model_fn, "NULL with a data frame: name a canned model in `model`")
    return(tune_table_runs(cfg, flags, data = data, label = label, model = model, feature_columns = feature_columns,
                           missing = missing, split = split, task = task, sample = sample,
                           early_stopping = table_early_stopping_arg(early_stopping),
                           runs_dir = as_nullable_path(runs_dir, "runs_dir"), overrides = overrides_from_dots(...),
                           export = export, verbose = verbose, hooks = hooks,
                           progress = as_nullable_function(progress, "progress")))
  }
  if (!isTRUE(early_stopping)) {  # never ignored quietly
    arg_error("early_stopping", early_stopping,
              "TRUE with a configuration: its eval.early_stopping sets the rule (a data frame takes FALSE or a list)")
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
  tuned_runs_df(trained)
}

# The runs a tuning trained (their folders), as tpu_ls_runs() lists them, best first.
tuned_runs_df <- function(trained) {
  trained <- normalizePath(trained, winslash = "/")
  all_runs <- tpu_ls_runs(unique(dirname(trained))[[1]])
  out <- all_runs[normalizePath(all_runs$run_dir, winslash = "/") %in% trained, , drop = FALSE]
  if ("eval_loss" %in% names(out)) out <- out[order(out$eval_loss, na.last = TRUE), , drop = FALSE]
  rownames(out) <- NULL
  class(out) <- c("tpu_runs_df", "data.frame")
  out
}

# tpu_tuning_run() of a data frame or formula: the table written once, one model per combination
# (tpuestimator.tables.tune_table).
tune_table_runs <- function(cfg, flags, data, label, model, feature_columns, missing, split, task, sample,
                            early_stopping, runs_dir, overrides, export, verbose, hooks, progress) {
  table <- if (inherits(cfg, "formula")) table_from_formula(cfg, data) else list(data = cfg, label = label)
  if (is.null(table$label)) {
    arg_error("label", NULL, "the name of the column to predict (or a formula such as mpg ~ . with data =)")
  }
  label <- as_string(table$label, "label")
  if (!label %in% names(table$data)) {
    stop("`label` is \"", label, "\", which is not a column of the data frame; the columns are: ",
         paste(names(table$data), collapse = ", "), ".", call. = FALSE)
  }
  feature_columns <- c(table$feature_columns[setdiff(names(table$feature_columns), names(feature_columns))],
                       feature_columns)
  quiet_python_console()  # defined in console.R
  args <- c(list(r_table_to_py(table$data), label,
                 r_to_json(lapply(flags, function(v) if (is.list(v)) v else as.list(v))),
                 model = as_string(model %||% "dnn", "model"), split = as.numeric(split),
                 overrides = as.list(overrides), sample = sample, export = export, early_stopping = early_stopping,
                 runs_dir = normalizePath(runs_dir %||% default_runs_dir(), mustWork = FALSE),
                 on_run = py_bridge()$r_callback(reticulate::r_to_py(wrap_r_callback(function(i, n, label) {
                   if (verbose) message(sprintf("tuning run %d/%d: %s", as.integer(i), as.integer(n), label))
                 }, "tuning progress"), convert = TRUE))),
            job_callbacks(NULL, as_hook_list(hooks), progress, verbose))
  if (!is.null(task)) args$task <- as_string(task, "task")
  if (length(feature_columns)) args$feature_columns <- r_to_py_json(feature_columns)
  if (!is.null(missing)) args$missing <- table_missing_arg(missing)
  trained <- as.character(reticulate::py_to_r(with_python(do.call(py_bridge()$tune_table, args))))
  tuned_runs_df(trained)
}
