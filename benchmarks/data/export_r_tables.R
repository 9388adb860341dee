# Writes R's built-in tables (package `datasets`, nothing downloaded) as CSV for
# benchmarks/bench_tables_quality.py:  Rscript benchmarks/data/export_r_tables.R [OUT_DIR]
# Row names are dropped (car names in mtcars identify rows, they are not a feature); factors
# are written as their labels; rows with a missing value are dropped (airquality), since the
# least-squares and logistic baselines take complete rows only; identifier columns (CO2$Plant,
# infert's strata) are dropped: each names a group, not a property a model could learn from.
args <- commandArgs(trailingOnly = TRUE)
if (length(args)) {
  out <- args[[1]]
} else {
  file_arg <- grep("^--file=", commandArgs(FALSE), value = TRUE)
  out <- dirname(normalizePath(sub("^--file=", "", file_arg)))
}
tables <- list(
  mtcars = datasets::mtcars,
  iris = datasets::iris,
  swiss = datasets::swiss,
  trees = datasets::trees,
  quakes = datasets::quakes[, c("lat", "long", "depth", "stations", "mag")],
  stackloss = datasets::stackloss,
  LifeCycleSavings = datasets::LifeCycleSavings,
  attitude = datasets::attitude,
  longley = datasets::longley,
  airquality = stats::na.omit(datasets::airquality),
  ToothGrowth = datasets::ToothGrowth,
  warpbreaks = datasets::warpbreaks,
  CO2 = as.data.frame(datasets::CO2)[, c("Type", "Treatment", "conc", "uptake")],
  infert = datasets::infert[, c("education", "age", "parity", "induced", "case", "spontaneous")]
)
for (name in names(tables)) {
  df <- as.data.frame(tables[[name]])
  for (col in names(df)) if (is.factor(df[[col]])) df[[col]] <- as.character(df[[col]])
  path <- file.path(out, paste0(name, ".csv"))
  utils::write.csv(df, path, row.names = FALSE)
  cat(sprintf("%s: %d rows, %d columns\n", path, nrow(df), ncol(df)))
}
