#' RStudio addins
#'
#' Functions behind the RStudio addins "View latest run" ([tpu_view_run()] on
#' [tpu_latest_run()]) and "TensorBoard for latest run" ([tpu_tensorboard()] on
#' [tpu_latest_run()]). They work outside RStudio too.
#'
#' @return The report's path or TensorBoard's URL, invisibly; `NULL` when there
#'   are no runs.
#' @examples
#' \dontrun{
#' addin_view_latest_run()
#' }
#' @name tpuestimatorr_addins
#' @keywords internal
NULL

#' @rdname tpuestimatorr_addins
#' @export
addin_view_latest_run <- function() {
  run <- tpu_latest_run()
  if (is.null(run)) {
    message("No runs in \"", default_runs_dir(), "\" yet: train one with tpu_train().")
    return(invisible(NULL))
  }
  tpu_view_run(run, viewer = default_viewer() %||% utils::browseURL)
}

#' @rdname tpuestimatorr_addins
#' @export
addin_tensorboard_latest_run <- function() {
  run <- tpu_latest_run()
  if (is.null(run)) {
    message("No runs in \"", default_runs_dir(), "\" yet: train one with tpu_train().")
    return(invisible(NULL))
  }
  tpu_tensorboard(run, launch_browser = TRUE)
}
