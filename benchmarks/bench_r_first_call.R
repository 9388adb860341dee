# The first tpu_train() of an R session against later ones on the same data (issue 34, item 9:
# "the first tpu_train() of a session at most 2x a later one on the same data").
#
#   Rscript benchmarks/bench_r_first_call.R [--sessions N] [--later K] [--data mtcars,quakes]
#                                           [--out benchmarks/r_first_call_results.md] [--label TEXT]
#   Rscript benchmarks/bench_r_first_call.R --breakdown [--data mtcars] [--out FILE]
#
# From the repository root, with the package installed (R_LIBS) and TPUESTIMATORR_PYTHON set as
# for the tests. Each session is a fresh Rscript process: library(tpuestimatorr), then the first
# tpu_train(<data>, label =) and K later ones on the same data frame, each into a new model dir
# (verbose = FALSE, defaults otherwise: dnn, early stopping). Each call is timed with
# proc.time(): CPU = user + sys of the R process itself (the embedded Python and TensorFlow's
# threads included; no child processes are involved) and wall = elapsed. Per data set the
# results give the median first call, the median later call (over every later call of every
# session) and the ratios of the medians; each session's own ratio first / median(later) is
# listed too. CPU is the figure to compare on a loaded machine; wall is what a user waits.
args <- commandArgs(trailingOnly = TRUE)
`%||%` <- function(a, b) if (is.null(a)) b else a
opt <- function(name, default) {
  i <- match(paste0("--", name), args)
  if (is.na(i)) default else args[[i + 1L]]
}
sessions <- as.integer(opt("sessions", "3"))
later <- as.integer(opt("later", "3"))
datasets <- strsplit(opt("data", "mtcars,quakes"), ",", fixed = TRUE)[[1]]
out_file <- opt("out", "benchmarks/r_first_call_results.md")
label_text <- opt("label", "")
labels <- c(mtcars = "mpg", quakes = "mag")  # regressions on R's built-in tables (32 and 1,000 rows)

child_lines <- function(data, label, later, work) {
  c(
    "cpu <- function(t) sum(t[c('user.self', 'sys.self')])",
    "t0 <- proc.time()",
    "library(tpuestimatorr)",
    "t1 <- proc.time()",
    sprintf("cat(sprintf('LIB %%.3f %%.3f\\n', cpu(t1) - cpu(t0), (t1 - t0)[['elapsed']]))"),
    sprintf("df <- datasets::%s", data),
    sprintf("for (i in 0:%d) {", later),
    "  t <- proc.time()",
    sprintf("  run <- tpu_train(df, label = '%s', verbose = FALSE, model_dir = file.path('%s', paste0('m', i)),",
            label, work),
    sprintf("                   runs_dir = file.path('%s', 'runs'))", work),
    "  u <- proc.time()",
    "  cat(sprintf('CALL %d %.3f %.3f %d\\n', i, cpu(u) - cpu(t), (u - t)[['elapsed']], as.integer(run$global_step)))",
    "}"
  )
}

run_session <- function(data, s) {
  work <- normalizePath(tempfile(paste0("first-call-", data, "-")), mustWork = FALSE)
  dir.create(work)
  script <- file.path(work, "session.R")
  writeLines(child_lines(data, labels[[data]], later, work), script)
  out <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE)
  status <- attr(out, "status") %||% 0L
  if (status != 0L) stop("session ", s, " on ", data, " failed:\n", paste(out, collapse = "\n"))
  lib <- strsplit(grep("^LIB ", out, value = TRUE), " ")[[1]]
  calls <- do.call(rbind, lapply(strsplit(grep("^CALL ", out, value = TRUE), " "), function(f) {
    data.frame(call = as.integer(f[[2]]), cpu = as.numeric(f[[3]]), wall = as.numeric(f[[4]]), steps = as.integer(f[[5]]))
  }))
  unlink(work, recursive = TRUE)
  calls$session <- s
  calls$data <- data
  calls$lib_cpu <- as.numeric(lib[[2]])
  calls$lib_wall <- as.numeric(lib[[3]])
  calls
}

# --breakdown: one session per data set, the first call's start-up paid step by step before it (each
# step what the first tpu_train() would otherwise pay itself), then the first and a later call.
breakdown_lines <- function(data, label, work) {
  c(
    "cpu <- function(t) sum(t[c('user.self', 'sys.self')])",
    "step <- function(what, expr) { t <- proc.time(); force(expr); u <- proc.time()",
    "  cat(sprintf('STEP %s|%.3f|%.3f\\n', what, cpu(u) - cpu(t), (u - t)[['elapsed']])) }",
    "step('library(tpuestimatorr)', library(tpuestimatorr))",
    "step('reticulate: load, start Python, import tpuestimator (no TensorFlow)', tpuestimatorr:::py_core())",
    "step('the R bridge module', tpuestimatorr:::py_bridge())",
    "step('import pandas (the data frame conversion)', reticulate::import('pandas'))",
    "step('import tensorflow (with Keras, which it imports)', reticulate::import('tensorflow'))",
    "step('import the table path (tables, jobs, core, models, data)', reticulate::py_run_string(paste(",
    "  'import tpuestimator.tables.api, tpuestimator.tables.write, tpuestimator.jobs.job, tpuestimator.core.training,',",
    "  'tpuestimator.models.canned, tpuestimator.data.pipeline, tpuestimator.serving.exports')))",
    sprintf("df <- datasets::%s", data),
    "for (i in 0:2) step(if (i == 0) 'first tpu_train() after the above' else 'a later tpu_train()',",
    sprintf("  tpu_train(df, label = '%s', verbose = FALSE, model_dir = file.path('%s', paste0('m', i)),", label, work),
    sprintf("            runs_dir = file.path('%s', 'runs')))", work)
  )
}

if ("--breakdown" %in% args) {
  lines <- c("# Where the first tpu_train() of an R session spends its time (bench_r_first_call.R --breakdown)", "",
             paste0("One fresh Rscript per data set, ", format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC"),
                    if (nzchar(label_text)) paste0(" (", label_text, ")") else "", "; CPU s (user + sys of the R ",
                    "process) and wall s of each step, run in this order; each step is what the first tpu_train() ",
                    "pays itself when nothing ran before it."), "")
  for (data in datasets) {
    work <- normalizePath(tempfile(paste0("first-call-", data, "-")), mustWork = FALSE)
    dir.create(work)
    script <- file.path(work, "session.R")
    writeLines(breakdown_lines(data, labels[[data]], work), script)
    out <- system2(file.path(R.home("bin"), "Rscript"), script, stdout = TRUE, stderr = TRUE)
    if ((attr(out, "status") %||% 0L) != 0L) stop("breakdown on ", data, " failed:\n", paste(out, collapse = "\n"))
    steps <- strsplit(sub("^STEP ", "", grep("^STEP ", out, value = TRUE)), "|", fixed = TRUE)
    lines <- c(lines, paste0("**", data, "**"), "", "| step | CPU s | wall s |", "|---|---|---|",
               vapply(steps, function(f) paste0("| ", f[[1]], " | ", sprintf("%.2f", as.numeric(f[[2]])), " | ",
                                                sprintf("%.2f", as.numeric(f[[3]])), " |"), ""), "")
    unlink(work, recursive = TRUE)
  }
  writeLines(lines, out_file)
  message(paste(lines, collapse = "\n"))
  quit(save = "no")
}

rows <- list()
for (s in seq_len(sessions)) {
  for (data in datasets) {  # interleaved: the data sets meet the same load
    r <- run_session(data, s)
    message(sprintf("session %d %-7s library %.2f s CPU | first %.2f CPU s (%.1f wall) | later %s CPU s", s, data,
                    r$lib_cpu[[1]], r$cpu[r$call == 0], r$wall[r$call == 0],
                    paste(sprintf("%.2f", r$cpu[r$call > 0]), collapse = ", ")))
    rows[[length(rows) + 1L]] <- r
  }
}
all <- do.call(rbind, rows)

fmt <- function(x) sprintf("%.2f", x)
lines <- c(
  "# First tpu_train() of an R session against later ones (benchmarks/bench_r_first_call.R)",
  "",
  paste0("Generated by `Rscript benchmarks/bench_r_first_call.R --sessions ", sessions, " --later ", later,
         " --data ", paste(datasets, collapse = ","), "` on ", format(Sys.time(), "%Y-%m-%d %H:%M UTC", tz = "UTC"),
         if (nzchar(label_text)) paste0(" (", label_text, ")") else "", "; load average at the end: ",
         tryCatch(paste(strsplit(readLines("/proc/loadavg"), " ")[[1]][1:3], collapse = " "), error = function(e) "?"),
         "."),
  "",
  "Each session is a fresh Rscript: `library(tpuestimatorr)`, then `tpu_train(df, label =)` (dnn, early stopping, ",
  "`verbose = FALSE`) once and again on the same data frame into new model dirs. CPU: user + sys seconds of the ",
  "R process (embedded Python included); wall: elapsed seconds.",
  "",
  "| data | rows | library() CPU s | first CPU s | later CPU s | CPU first/later | first wall s | later wall s | wall first/later | steps (first; later) |",
  "|---|---|---|---|---|---|---|---|---|---|"
)
for (data in datasets) {
  d <- all[all$data == data, ]
  first <- d[d$call == 0, ]
  rest <- d[d$call > 0, ]
  rows_n <- nrow(get(data, envir = asNamespace("datasets")))
  lines <- c(lines, paste0(
    "| ", data, " | ", rows_n, " | ", fmt(stats::median(first$lib_cpu)), " | ", fmt(stats::median(first$cpu)), " | ",
    fmt(stats::median(rest$cpu)), " | **", fmt(stats::median(first$cpu) / stats::median(rest$cpu)), "x** | ",
    fmt(stats::median(first$wall)), " | ", fmt(stats::median(rest$wall)), " | ",
    fmt(stats::median(first$wall) / stats::median(rest$wall)), "x | ",
    paste(unique(first$steps), collapse = "/"), "; ", paste(unique(rest$steps), collapse = "/"), " |"))
}
lines <- c(lines, "", "Per session (CPU s: first, later calls; the session's first / median later):", "")
for (data in datasets) {
  for (s in seq_len(sessions)) {
    d <- all[all$data == data & all$session == s, ]
    lines <- c(lines, paste0("- ", data, " session ", s, ": first ", fmt(d$cpu[d$call == 0]), ", later ",
                             paste(fmt(d$cpu[d$call > 0]), collapse = ", "), ": ",
                             fmt(d$cpu[d$call == 0] / stats::median(d$cpu[d$call > 0])), "x (wall ",
                             fmt(d$wall[d$call == 0]), " / ", fmt(stats::median(d$wall[d$call > 0])), ")"))
  }
}
writeLines(lines, out_file)
message("wrote ", out_file)
