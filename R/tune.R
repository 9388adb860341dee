#' Tuning runs: one training per combination of flag values
#'
#' Trains `cfg` once per combination of the `flags` values, as tfruns's
#' `tuning_run()` does: each combination is a separate run with its own new
#' model dir (under `<runs_dir>/.models/`), so no run continues another's
#' checkpoint, and its own run folder (tagged with the `tuning_run` property).
#' Pick the best with [ls_runs()], e.g.
#' `ls_runs(order = "eval_loss", decreasing = FALSE)`. The same as the command
#' line's `tpuestimator tune CONFIG --grid params.learning_rate=1e-3,3e-3`.
#'
#' @param cfg A configuration: a YAML/JSON file, a list or a [tpu_config()].
#' @param flags A named list: configuration fields (dotted, as `--set` takes
#'   them) and their values, e.g. `list(params.learning_rate = c(1e-3, 3e-3))`.
#'   Every combination is trained, the first flag varying fastest
#'   (`expand.grid()` order).
#' @param sample Train only this random fraction (in (0, 1]) of the
#'   combinations. `NULL` or `1`: all of them.
#' @param runs_dir Folder of run records (default: the configuration's
#'   `run.runs_dir`, `"runs"`); the model dirs go under its `.models/`.
#' @param verbose Print a line per run and the progress lines.
#' @param ... Passed on to [tpu_train()] for every run (`model_fn`, `hooks`,
#'   `export`, or more `key = value` overrides applied to every run).
#' @return A data frame of class `tpu_runs_df` (see [ls_runs()]) with the runs
#'   trained, best (lowest `eval_loss`) first when an evaluation loss was
#'   recorded. A combination whose training fails is reported and skipped.
#' @seealso [tpu_train()], [ls_runs()], [compare_runs()]
#' @examples
#' \dontrun{
#' runs <- tpu_tuning_run("digits.yaml",
#'                        flags = list(params.learning_rate = c(1e-3, 3e-3, 1e-2)))
#' runs[, c("run_dir", "eval_loss", "flag_learning_rate")]
#' }
#' @export
tpu_tuning_run <- function(cfg, flags, sample = NULL, runs_dir = NULL,
                           verbose = getOption("tpuestimatorr.verbose", TRUE), ...) {
  verbose <- as_flag(verbose, "verbose")
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
  grid <- expand.grid(lapply(flags, function(v) if (is.list(v)) v else as.list(v)), KEEP.OUT.ATTRS = FALSE,
                      stringsAsFactors = FALSE)
  n_all <- nrow(grid)
  if (!is.null(sample) && sample < 1) {
    keep <- sort(base::sample.int(n_all, max(1L, round(n_all * sample))))
    grid <- grid[keep, , drop = FALSE]
  }
  runs_dir <- as_nullable_path(runs_dir, "runs_dir") %||% default_runs_dir()
  stamp <- format(Sys.time(), "%Y-%m-%dT%H-%M-%SZ", tz = "UTC")
  trained <- character()
  for (i in seq_len(nrow(grid))) {
    combo <- lapply(grid[i, , drop = FALSE], function(col) col[[1]])
    label <- paste(names(combo), vapply(combo, format, ""), sep = "=", collapse = ", ")
    if (verbose) message(sprintf("tuning run %d/%d: %s", i, nrow(grid), label))
    model_dir <- file.path(runs_dir, ".models", sprintf("tune-%s-%03d", stamp, i))
    run <- tryCatch(
      do.call(tpu_train, c(list(cfg, model_dir = model_dir, runs_dir = runs_dir, verbose = verbose),
                           combo, list(...))),
      error = function(e) {
        message(sprintf("tuning run %d/%d (%s) failed: %s", i, nrow(grid), label, conditionMessage(e)))
        NULL
      }
    )
    if (!is.null(run) && !is.null(run$run_dir)) {
      props <- file.path(run$run_dir, "tfruns.d", "properties")
      if (dir.exists(props)) {
        writeLines(stamp, file.path(props, "tuning_run"))
        writeLines(as.character(i), file.path(props, "tuning_index"))
      }
      trained <- c(trained, normalizePath(run$run_dir, winslash = "/"))
    }
  }
  if (!length(trained)) stop("Every tuning run failed; see the messages above.", call. = FALSE)
  all_runs <- ls_runs(runs_dir)
  keep <- normalizePath(all_runs$run_dir, winslash = "/") %in% trained
  out <- all_runs[keep, , drop = FALSE]
  if ("eval_loss" %in% names(out)) out <- out[order(out$eval_loss, na.last = TRUE), , drop = FALSE]
  rownames(out) <- NULL
  class(out) <- c("tpu_runs_df", "data.frame")
  out
}
