# What tpu_train() shows and returns: its progress lines while it trains, and the tpu_run object
# made from the core's JobResult, printed and summarised.

# The R progress callback: prints fixed-column lines, then calls the user's callback.
progress_callback <- function(verbose, user = NULL) {
  force(verbose)
  force(user)
  function(event, info) {
    if (verbose) {
      line <- format_progress(event, info)
      if (!is.null(line)) message(line)
    }
    if (!is.null(user)) user(event, info)
    invisible(NULL)
  }
}

# One fixed-column line per event of tpuestimator's ProgressCallbackHook: begin (step,
# max_steps), loop (step, max_steps, loss, steps_per_sec, eval_loss once an evaluation ran:
# the latest one's loss, shown beside the training loss), eval (step, metrics), end (step).
format_progress <- function(event, info) {
  info <- if (is.list(info)) info else list()
  num <- function(x, digits = 4) {
    if (is.null(x) || length(x) != 1L || !is.numeric(x)) return(NA_character_)
    if (is.na(x)) return("nan")
    if (x == round(x) && abs(x) < 1e15) return(format(x, scientific = FALSE))
    if (abs(x) >= 10^(digits - 1)) return(sprintf("%.0f", x))
    formatC(x, digits = digits, format = "fg", flag = "#")
  }
  field <- function(label, value) if (is.na(value)) NULL else paste0(label, ": ", value)
  switch(
    event,
    begin = {
      parts <- c(field("max steps", num(info$max_steps)), field("start step", num(info$step)))
      paste(c("begin", parts), collapse = " | ")
    },
    loop = {
      step <- num(info$step)
      if (!is.null(info$max_steps) && !is.na(num(info$max_steps))) step <- paste0(step, "/", num(info$max_steps))
      parts <- c(
        field("step", step),
        field("steps/sec", num(info$steps_per_sec, 4)),
        field("loss", num(info$loss)),
        field("eval loss", num(info$eval_loss))
      )
      paste(c("train", parts), collapse = " | ")
    },
    eval = {
      metrics <- info$metrics %||% list()
      metrics <- metrics[setdiff(names(metrics), c("global_step", "num_examples"))]
      metrics <- metrics[vapply(metrics, function(v) is.numeric(v) && length(v) == 1L, logical(1))]
      parts <- c(field("step", num(info$step)),
                 vapply(names(metrics), function(n) paste0(n, ": ", num(metrics[[n]])), ""))
      paste(c("eval ", parts), collapse = " | ")
    },
    end = paste(c("end  ", field("step", num(info$step))), collapse = " | "),
    NULL
  )
}

# JobResult (Python) -> tpu_run (R).
tpu_run_from_result <- function(result) {
  fields <- py_bridge()$job_result_dict(result)
  get <- function(name, simplify = TRUE) py_to_r_json(fields$get(name), simplify = simplify)
  config <- tryCatch(get("config", simplify = FALSE), error = function(e) NULL)
  history <- get("history")
  new_tpu_run(
    run_dir = abs_path_or_null(get("run_dir")),
    model_dir = abs_path_or_null(get("model_dir")),
    export_dir = abs_path_or_null(get("export_dir")),
    metrics = as.list(get("metrics")),
    history = as_history_df(history),
    global_step = scalar_or_null(get("global_step")),
    config = config
  )
}

new_tpu_run <- function(run_dir, model_dir = NULL, export_dir = NULL, metrics = list(),
                        history = data.frame(), global_step = NULL, config = NULL, ...) {
  structure(
    list(run_dir = run_dir, model_dir = model_dir, export_dir = export_dir, metrics = metrics,
         history = history, global_step = global_step, config = config, ...),
    class = "tpu_run"
  )
}

abs_path_or_null <- function(x) {
  x <- scalar_or_null(x)
  if (is.character(x)) normalizePath(x, winslash = "/", mustWork = FALSE) else x
}

scalar_or_null <- function(x) {
  if (is.null(x) || length(x) == 0L || (length(x) == 1L && is.na(x))) NULL else x
}

as_history_df <- function(history) {
  if (is.null(history) || length(history) == 0L) return(data.frame(step = integer()))
  if (!is.data.frame(history)) {
    if (!is.list(history)) return(data.frame(step = integer()))
    rows <- lapply(history, function(r) as.data.frame(null_to_na(r), stringsAsFactors = FALSE))
    history <- do.call(rbind_fill, rows)
  }
  if (is.null(history$step) && !is.null(history$global_step)) history$step <- history$global_step
  history$global_step <- NULL
  front <- intersect("step", names(history))
  history[c(front, setdiff(names(history), front))]
}

rbind_fill <- function(...) {
  dfs <- list(...)
  dfs <- dfs[!vapply(dfs, is.null, logical(1))]
  if (!length(dfs)) return(data.frame())
  cols <- unique(unlist(lapply(dfs, names)))
  dfs <- lapply(dfs, function(d) {
    for (col in setdiff(cols, names(d))) d[[col]] <- rep(NA, nrow(d))
    d[cols]
  })
  out <- do.call(rbind, dfs)
  rownames(out) <- NULL
  out
}

#' @export
print.tpu_run <- function(x, ...) {
  cat("<tpu_run> ", x$run_dir %||% "(no run folder)", "\n", sep = "")
  if (!is.null(x$model_dir)) cat("  model dir:   ", x$model_dir, "\n", sep = "")
  if (!is.null(x$export_dir)) cat("  export:      ", x$export_dir, "\n", sep = "")
  if (!is.null(x$global_step)) cat("  global step: ", x$global_step, "\n", sep = "")
  if (!is.null(x$completed) && !isTRUE(x$completed)) cat("  completed:   FALSE\n")
  metrics <- numeric_metrics(x$metrics)
  if (length(metrics)) {
    cat("  evaluation:  ",
        paste(names(metrics), formatC(metrics, digits = 4, format = "fg", flag = "#"), sep = " ", collapse = ", "),
        "\n", sep = "")
  }
  invisible(x)
}

numeric_metrics <- function(metrics) {
  if (is.null(metrics) || !length(metrics)) return(numeric())
  metrics <- metrics[setdiff(names(metrics), c("global_step", "num_examples"))]
  if (!length(metrics)) return(numeric())
  keep <- vapply(metrics, function(v) is.numeric(v) && length(v) == 1L, logical(1))
  unlist(metrics[keep])
}

#' @export
summary.tpu_run <- function(object, ...) {
  structure(
    list(
      run_dir = object$run_dir,
      model_dir = object$model_dir,
      export_dir = object$export_dir,
      global_step = object$global_step,
      metrics = numeric_metrics(object$metrics),
      history = object$history,
      name = object$config$name,
      model = object$config$model,
      batch_size = object$config$train$batch_size,
      strategy = object$config$run$strategy
    ),
    class = "summary.tpu_run"
  )
}

#' @export
print.summary.tpu_run <- function(x, ...) {
  cat("Run:         ", x$run_dir %||% "-", "\n", sep = "")
  if (!is.null(x$name)) cat("Job:         ", x$name, " (model: ", x$model %||% "?", ")\n", sep = "")
  if (!is.null(x$batch_size)) cat("Batch size:  ", x$batch_size, " (global)\n", sep = "")
  if (!is.null(x$strategy)) cat("Strategy:    ", x$strategy, "\n", sep = "")
  if (!is.null(x$global_step)) cat("Global step: ", x$global_step, "\n", sep = "")
  if (!is.null(x$model_dir)) cat("Model dir:   ", x$model_dir, "\n", sep = "")
  if (!is.null(x$export_dir)) cat("Export:      ", x$export_dir, "\n", sep = "")
  if (length(x$metrics)) {
    cat("\nFinal evaluation:\n")
    print(x$metrics, digits = 4)
  }
  if (is.data.frame(x$history) && nrow(x$history)) {
    cat("\nEvaluation history:\n")
    print(x$history, digits = 4, row.names = FALSE)
  }
  invisible(x)
}
