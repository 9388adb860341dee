# HTML reports of runs (view_run, compare_runs), written in R: no Python needed.

#' View a run report
#'
#' Writes a self-contained HTML report of a run (summary, final evaluation, charts
#' of the recorded metrics, flags, properties, files and any error) and opens it
#' in the browser (or RStudio's viewer).
#'
#' @param run_dir A run: a `tpu_run`, a row of [tpu_ls_runs()], a run folder, or
#'   `NULL` for [tpu_latest_run()].
#' @param viewer A function called with the report's path (default
#'   [utils::browseURL()]), or `NULL` to only write the report. Default: open it in
#'   interactive sessions only.
#' @param output The HTML file to write. Default: a temporary file.
#' @param runs_dir The runs folder searched when `run_dir` is `NULL`.
#' @return The path of the HTML report, invisibly.
#' @seealso [tpu_compare_runs()], [tpu_ls_runs()]
#' @examples
#' \dontrun{
#' tpu_view_run()                          # the latest run
#' tpu_view_run(tpu_ls_runs()[2, ])
#' }
#' @export
tpu_view_run <- function(run_dir = NULL, viewer = default_viewer(), output = NULL,
                     runs_dir = default_runs_dir()) {
  run_dir <- as_run_dir(run_dir, "run_dir", runs_dir)
  run <- tpu_run_info(run_dir)
  output <- output %||% tempfile(paste0("run-", basename(run_dir), "-"), fileext = ".html")
  html <- run_report_html(run)
  writeLines(html, output, useBytes = TRUE)
  open_report(output, viewer)
}

#' Compare two runs
#'
#' Writes an HTML report comparing two runs side by side (final evaluation,
#' metrics charted together, the flags that differ) and opens it.
#'
#' @param runs Two runs: a data frame from [tpu_ls_runs()] with two rows, a character
#'   vector of two run folders, or a list of two `tpu_run`s. Default: the two most
#'   recent runs.
#' @inheritParams tpu_view_run
#' @return The path of the HTML report, invisibly.
#' @examples
#' \dontrun{
#' tpu_compare_runs()
#' tpu_compare_runs(tpu_ls_runs(order = "eval_accuracy")[1:2, ])
#' }
#' @export
tpu_compare_runs <- function(runs = tpu_ls_runs(runs_dir = runs_dir, latest_n = 2), viewer = default_viewer(),
                         output = NULL, runs_dir = default_runs_dir()) {
  dirs <- if (is.data.frame(runs)) {
    runs$run_dir
  } else if (is.character(runs)) {
    runs
  } else if (is.list(runs)) {
    vapply(runs, function(r) as_run_dir(r, "runs"), "")
  } else {
    arg_error("runs", runs, "two runs: a tpu_ls_runs() data frame with two rows or two run folders")
  }
  if (length(dirs) != 2L) {
    stop("`runs` must hold exactly two runs to compare. Received ", length(dirs), " run(s)",
         if (length(dirs) < 2L) paste0(" (the runs folder \"", runs_dir, "\" holds ", length(list_run_dirs(runs_dir)),
                                       "); train another run or pass two run folders") else
           "; select two rows, e.g. tpu_ls_runs()[1:2, ]", ".", call. = FALSE)
  }
  infos <- lapply(dirs, function(d) tpu_run_info(as_run_dir(d, "runs")))
  output <- output %||% tempfile("compare-runs-", fileext = ".html")
  writeLines(compare_report_html(infos[[1]], infos[[2]]), output, useBytes = TRUE)
  open_report(output, viewer)
}

default_viewer <- function() {
  if (!interactive()) return(NULL)
  if (requireNamespace("rstudioapi", quietly = TRUE) && rstudioapi::isAvailable()) {
    return(function(path) rstudioapi::viewer(path))
  }
  utils::browseURL
}

open_report <- function(path, viewer) {
  path <- normalizePath(path, winslash = "/")
  if (!is.null(viewer)) {
    if (!is.function(viewer)) arg_error("viewer", viewer, "NULL or a function(path)")
    viewer(path)
  }
  invisible(path)
}

html_escape <- function(x) {
  x <- gsub("&", "&amp;", as.character(x), fixed = TRUE)
  x <- gsub("<", "&lt;", x, fixed = TRUE)
  x <- gsub(">", "&gt;", x, fixed = TRUE)
  gsub("\"", "&quot;", x, fixed = TRUE)
}

fmt_value <- function(v) {
  if (is.null(v) || length(v) == 0L) return("")
  if (inherits(v, "POSIXct")) return(format(v, "%Y-%m-%d %H:%M:%S %Z"))
  if (is.numeric(v) && length(v) == 1L && !is.na(v) && v != round(v)) return(formatC(v, digits = 5, format = "fg"))
  paste(as.character(unlist(v)), collapse = ", ")
}

html_table <- function(values, header = c("name", "value")) {
  if (!length(values)) return("<p class=\"none\">none</p>")
  rows <- vapply(names(values), function(n) {
    paste0("<tr><td>", html_escape(n), "</td><td>", html_escape(fmt_value(values[[n]])), "</td></tr>")
  }, "")
  paste0("<table><tr><th>", header[[1]], "</th><th>", header[[2]], "</th></tr>",
         paste(rows, collapse = ""), "</table>")
}

report_page <- function(title, body) {
  css <- paste(
    "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em;color:#222;max-width:1100px}",
    "h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.6em;border-bottom:1px solid #ddd}",
    paste0("table{border-collapse:collapse;margin:.5em 0}",
           "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left;font-size:.9em}"),
    paste0("th{background:#f4f4f4}.none{color:#888}",
           ".err{background:#fee;padding:1em;white-space:pre-wrap;font-family:monospace}"),
    ".charts{display:flex;flex-wrap:wrap;gap:1em}.chart{border:1px solid #eee;padding:.5em}",
    ".diff{background:#fff6d6}.a{color:#1f77b4}.b{color:#d62728}"
  )
  c("<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
    paste0("<title>", html_escape(title), "</title><style>", css, "</style></head><body>"),
    paste0("<h1>", html_escape(title), "</h1>"), body, "</body></html>")
}

# An SVG line chart of one or more series (list of list(x, y, colour, label)).
svg_chart <- function(title, series, width = 480, height = 260) {
  series <- Filter(function(s) any(is.finite(s$y)), series)
  if (!length(series)) return("")
  xs <- unlist(lapply(series, function(s) s$x[is.finite(s$y)]))
  ys <- unlist(lapply(series, function(s) s$y[is.finite(s$y)]))
  xr <- range(xs)
  yr <- range(ys)
  if (diff(xr) == 0) xr <- xr + c(-0.5, 0.5)
  if (diff(yr) == 0) yr <- yr + c(-0.5, 0.5) * max(abs(yr[1]), 1)
  ml <- 60
  mr <- 10
  mt <- 24
  mb <- 30
  px <- function(x) ml + (x - xr[1]) / diff(xr) * (width - ml - mr)
  py <- function(y) height - mb - (y - yr[1]) / diff(yr) * (height - mt - mb)
  lines <- vapply(series, function(s) {
    ok <- is.finite(s$y)
    pts <- paste(sprintf("%.1f,%.1f", px(s$x[ok]), py(s$y[ok])), collapse = " ")
    dots <- if (sum(ok) <= 60) {
      paste(sprintf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>", px(s$x[ok]), py(s$y[ok]), s$colour),
            collapse = "")
    } else {
      ""
    }
    paste0("<polyline fill=\"none\" stroke=\"", s$colour, "\" stroke-width=\"1.8\" points=\"", pts, "\"/>", dots)
  }, "")
  legend <- paste(vapply(seq_along(series), function(i) {
    sprintf("<text x=\"%d\" y=\"14\" fill=\"%s\" font-size=\"11\">%s</text>", ml + (i - 1L) * 130L,
            series[[i]]$colour, html_escape(series[[i]]$label))
  }, ""), collapse = "")
  axis <- paste0(
    sprintf("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>",
            ml, height - mb, width - mr, height - mb),
    sprintf("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>", ml, mt, ml, height - mb),
    sprintf("<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%s</text>",
            ml - 4, mt + 8, html_escape(fmt_value(yr[2]))),
    sprintf("<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%s</text>",
            ml - 4, height - mb, html_escape(fmt_value(yr[1]))),
    sprintf("<text x=\"%d\" y=\"%d\" font-size=\"10\">%s</text>", ml, height - 8, html_escape(fmt_value(xr[1]))),
    sprintf("<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\">%s</text>",
            width - mr, height - 8, html_escape(fmt_value(xr[2])))
  )
  paste0("<div class=\"chart\"><b>", html_escape(title), "</b><br><svg width=\"", width, "\" height=\"", height,
         "\" xmlns=\"http://www.w3.org/2000/svg\">", axis, paste(lines, collapse = ""), legend, "</svg></div>")
}

history_x <- function(history) {
  for (col in c("step", "epoch")) if (!is.null(history[[col]])) return(as.numeric(history[[col]]))
  seq_len(nrow(history))
}

metric_charts <- function(histories, colours, labels) {
  names_all <- unique(unlist(lapply(histories, names)))
  base <- setdiff(names_all[!startsWith(names_all, "val_")], c("step", "epoch"))
  charts <- vapply(base, function(m) {
    series <- list()
    for (i in seq_along(histories)) {
      h <- histories[[i]]
      if (!nrow(h)) next
      x <- history_x(h)
      if (!is.null(h[[m]])) {
        series[[length(series) + 1L]] <- list(x = x, y = suppressWarnings(as.numeric(h[[m]])),
                                              colour = colours[[i]], label = paste0(labels[[i]], m))
      }
      vm <- paste0("val_", m)
      if (!is.null(h[[vm]])) {
        series[[length(series) + 1L]] <- list(x = x, y = suppressWarnings(as.numeric(h[[vm]])),
                                              colour = if (length(histories) == 1L) "#d62728" else colours[[i]],
                                              label = paste0(labels[[i]], vm))
      }
    }
    svg_chart(m, series)
  }, "")
  paste0("<div class=\"charts\">", paste(charts, collapse = ""), "</div>")
}

run_files <- function(run_dir) {
  files <- list.files(run_dir, recursive = TRUE, all.files = FALSE)
  files[!startsWith(files, "tfruns.d/") & !startsWith(files, "logs/")]
}

run_report_html <- function(run) {
  props <- run$properties
  summary <- list(
    run_dir = run$run_dir, script = props$script, start = run$start, end = run$end,
    duration = if (!is.null(run$start) && !is.null(run$end)) {
      paste(format(round(as.numeric(run$end) - as.numeric(run$start), 1)), "s")
    },
    completed = run$completed, model_dir = run$model_dir, export_dir = run$export_dir
  )
  summary <- summary[!vapply(summary, is.null, logical(1))]
  other_props <- props[setdiff(names(props), c("script", "start", "end", "completed", "model_dir", "export_dir",
                                               "output", "model"))]
  files <- run_files(run$run_dir)
  plots <- file.path(run$run_dir, files[startsWith(files, "plots/") & tolower(tools::file_ext(files)) == "png"])
  plot_html <- vapply(plots, function(p) {
    paste0("<img style=\"max-width:100%\" src=\"data:image/png;base64,",
           jsonlite::base64_enc(readBin(p, "raw", file.info(p)$size)), "\">")
  }, "")
  body <- c(
    "<h2>Summary</h2>", html_table(summary),
    "<h2>Evaluation</h2>", html_table(run$metrics, c("metric", "value")),
    "<h2>Metrics</h2>",
    if (nrow(run$history)) {
      metric_charts(list(run$history), c("#1f77b4"), c(""))
    } else {
      "<p class=\"none\">none recorded</p>"
    },
    plot_html,
    if (!is.null(run$error)) {
      c("<h2>Error</h2>",
        paste0("<div class=\"err\">", html_escape(run$error$message %||% ""), "\n",
               html_escape(paste(unlist(run$error$traceback), collapse = "\n")), "</div>"))
    },
    "<h2>Flags</h2>", html_table(run$flags, c("flag", "value")),
    if (!is.null(props$model)) c("<h2>Model</h2>", paste0("<pre>", html_escape(props$model), "</pre>")),
    # the console output, where tfruns's viewer shows it too (docs/RUN_FORMAT.md, rule 11)
    if (!is.null(props$output)) c("<h2>Output</h2>", paste0("<pre>", html_escape(props$output), "</pre>")),
    "<h2>Properties</h2>", html_table(other_props, c("property", "value")),
    "<h2>Files</h2>",
    if (length(files)) {
      paste0("<ul>", paste0("<li>", html_escape(utils::head(files, 200)), "</li>", collapse = ""), "</ul>")
    } else {
      "<p class=\"none\">none</p>"
    }
  )
  report_page(paste("Run", basename(run$run_dir)), body)
}

compare_report_html <- function(a, b) {
  la <- basename(a$run_dir)
  lb <- basename(b$run_dir)
  side <- function(x, y, header) {
    keys <- union(names(x), names(y))
    if (!length(keys)) return("<p class=\"none\">none</p>")
    rows <- vapply(keys, function(k) {
      va <- fmt_value(x[[k]])
      vb <- fmt_value(y[[k]])
      paste0("<tr", if (!identical(va, vb)) " class=\"diff\"", "><td>", html_escape(k), "</td><td>", html_escape(va),
             "</td><td>", html_escape(vb), "</td></tr>")
    }, "")
    paste0("<table><tr><th>", header, "</th><th class=\"a\">", html_escape(la), "</th><th class=\"b\">",
           html_escape(lb), "</th></tr>", paste(rows, collapse = ""), "</table>")
  }
  differing <- function(x, y) {
    keys <- union(names(x), names(y))
    keep <- keys[vapply(keys, function(k) !identical(fmt_value(x[[k]]), fmt_value(y[[k]])), logical(1))]
    list(x[intersect(keep, names(x))], y[intersect(keep, names(y))])
  }
  flags_diff <- differing(a$flags, b$flags)
  body <- c(
    "<h2>Runs</h2>",
    side(list(start = a$start, end = a$end, completed = a$completed, script = a$properties$script),
         list(start = b$start, end = b$end, completed = b$completed, script = b$properties$script), "run"),
    "<h2>Evaluation</h2>", side(a$metrics, b$metrics, "metric"),
    "<h2>Metrics</h2>",
    metric_charts(list(a$history, b$history), c("#1f77b4", "#d62728"), c(paste0(la, " "), paste0(lb, " "))),
    "<h2>Flags that differ</h2>", side(flags_diff[[1]], flags_diff[[2]], "flag"),
    "<h2>All flags</h2>", side(a$flags, b$flags, "flag")
  )
  report_page(paste("Compare", la, "and", lb), body)
}
