# Peak memory of R's tpu_predict() on a table model's CSV: read in chunks (`chunk_rows`) into a
# file, against the same CSV through read.csv() and a data frame, at 20,000 and 200,000 rows.
# Each measurement is a fresh Rscript whose peak RSS GNU time reports (%M, the whole process:
# R, Python and TensorFlow); `floor` predicts 10 rows (the fixed cost). Flat memory: the chunked
# peak at 200,000 rows about equals its peak at 20,000.
#
#   Rscript benchmarks/predict_csv_memory.R [WORK_DIR]   (from the repository root; needs /usr/bin/time)
args <- commandArgs(TRUE)
work <- if (length(args)) args[1] else file.path(tempdir(), "predict_csv_memory")
dir.create(work, showWarnings = FALSE, recursive = TRUE)
repo <- normalizePath(".")
load <- sprintf("suppressMessages(pkgload::load_all(%s, quiet = TRUE))", deparse(repo))
eval(parse(text = load))
set.seed(1)
make <- function(n) {   # 20 numeric columns and two categories
  df <- as.data.frame(matrix(round(stats::rnorm(n * 20), 4), n, 20))
  names(df) <- paste0("x", 1:20)
  df$colour <- sample(c("red", "green", "blue", "grey"), n, TRUE)
  df$shape <- sample(letters, n, TRUE)
  df
}
train <- make(2000)
train$y <- factor(ifelse(train$x1 + train$x2 > 0, "yes", "no"))
run <- suppressMessages(tpu_train(train, label = "y", model = "linear", train.max_steps = 20L,
                                  model_dir = file.path(work, "model"), runs_dir = file.path(work, "runs"),
                                  verbose = FALSE))
for (n in c(20000, 200000)) utils::write.csv(make(n), file.path(work, sprintf("rows%d.csv", n)), row.names = FALSE)
calls <- c(floor = "tpu_predict(export, utils::read.csv(path, nrows = 10))",
           data_frame = "tpu_predict(export, utils::read.csv(path))",
           chunks_to_file = "tpu_predict(export, path, out = tempfile(fileext = '.csv'), chunk_rows = 10000L)",
           chunks_to_data_frame = "tpu_predict(export, path, chunk_rows = 10000L)")
rows <- data.frame()
for (name in names(calls)) for (n in if (name == "floor") 20000 else c(20000, 200000)) {
  script <- file.path(work, "measure.R")
  writeLines(c(load, sprintf("export <- %s; path <- %s", deparse(run$export_dir),
                             deparse(file.path(work, sprintf("rows%d.csv", n)))),
               sprintf("invisible(suppressMessages(%s))", calls[[name]])), script)
  out <- system2("/usr/bin/time", c("-f", "PEAK_KB=%M", file.path(R.home("bin"), "Rscript"), script),
                 stdout = TRUE, stderr = TRUE)
  peak <- as.numeric(sub("PEAK_KB=", "", grep("^PEAK_KB=", out, value = TRUE)))
  rows <- rbind(rows, data.frame(measure = name, rows = if (name == "floor") 10L else as.integer(n),
                                 peak_mb = round(peak / 1024)))
}
print(rows, row.names = FALSE)
