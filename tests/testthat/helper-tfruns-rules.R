# Small re-statements of the rules of the real tfruns package (rstudio/tfruns), which cannot be
# installed here (no CRAN). Each one is written from the cited function and keeps only what
# our run records depend on; none is tfruns's code.

# R/ls_runs.R, run_record() + get_steps_unit(): the progress column is `steps_completed` when
# the run has a `steps` property, else `epochs_completed` when it has `epochs`, else
# `steps_completed`. Its value comes from the loop over the metrics.json keys that skips
# `epoch` and overwrites the count at every key: the non-null count of the LAST other array.
# The view (R/training_run.R, run_view_data()) shows "<completed>/<unit>" while completed <
# unit, else just <unit>, under the unit's name.
tfruns_rule_progress <- function(run_dir) {
  meta <- file.path(run_dir, "tfruns.d")
  props <- list.files(file.path(meta, "properties"))
  unit <- c(intersect(c("steps", "epochs"), props), "steps")[[1]]
  count <- 0L
  metrics_file <- file.path(meta, "metrics.json")
  if (file.exists(metrics_file)) {
    metrics <- jsonlite::read_json(metrics_file, simplifyVector = TRUE)
    for (key in names(metrics)) {
      if (key == "epoch") next
      count <- sum(!is.na(metrics[[key]]))
    }
  }
  planned <- if (unit %in% props) as.integer(readLines(file.path(meta, "properties", unit))) else NULL
  shown <- if (is.null(planned)) NULL else if (planned > count) paste0(count, "/", planned) else as.character(planned)
  list(unit = unit, column = paste0(unit, "_completed"), completed = as.integer(count), shown = shown)
}

# R/ls_runs.R, return_runs(): the order of tfruns's standard columns.
tfruns_rule_standard_columns <- c(
  "samples", "validation_samples", "batch_size", "steps", "steps_completed", "epochs",
  "epochs_completed", "metrics", "model", "loss_function", "optimizer", "learning_rate", "script",
  "source", "start", "end", "completed", "output", "error_message", "error_traceback",
  "source_code", "context", "type"
)

# inst/views/components/metrics_charts.html, MetricsCharts: one chart per metrics.json key that
# is neither `epoch` nor `val_`-prefixed; `val_<m>` is drawn in <m>'s chart only; the x axis
# is the `epoch` array (1..n without one).
tfruns_rule_charts <- function(metrics) {
  keys <- names(metrics)
  charted <- keys[!startsWith(keys, "val_") & keys != "epoch"]
  stats::setNames(lapply(charted, function(m) intersect(c(m, paste0("val_", m)), keys)), charted)
}

# R/training_run.R, with_changed_file_copy(): files under the artifacts dir (the working dir)
# that training_run() changed or added are copied into the run folder, except paths containing
# basename(run_dir) (a regular expression match) or starting with packrat/ or gs/. The
# snapshot is utils::fileSnapshot(recursive = TRUE), whose list.files() skips hidden files and
# does not descend into hidden folders such as runs/.models.
tfruns_rule_snapshot <- function(artifacts_dir) utils::fileSnapshot(path = artifacts_dir, recursive = TRUE)
tfruns_rule_copied_files <- function(before, after, run_dir) {
  changed <- utils::changedFiles(before, after)
  files <- c(changed$changed, changed$added)
  files <- files[!grepl(basename(run_dir), files)]
  files <- files[!grepl("^packrat[/\\\\]", files)]
  files[!grepl("^gs[/\\\\]", files)]
}
