# testthat for scripts/test.sh: every file, or those matching the filter in the first argument.
# Prints the counts, the slowest files and tests (as pytest's --durations does), and exits 1 on a
# failure or error, or on a skip when TPUESTIMATOR_FORCE_TESTS=1 (CI's rule).
# The files run in parallel R sessions (testthat's own `TESTTHAT_PARALLEL`; `TESTTHAT_CPUS`
# sessions, 2 by default): the R side is single-threaded, so one session left a core idle (serial
# 312 s, two sessions 199 s, the same 1,246 expectations). Each test works in its own temporary
# folder and each session has its own Python, so the files share nothing. The sessions take the
# files in order, the slowest first (DESCRIPTION's `Config/testthat/start-first`), so that no long
# file starts last and runs alone at the end. The durations are
# printed by a serial run only (`TESTTHAT_PARALLEL=FALSE`): a parallel run does not time the tests.
# Usage: Rscript scripts/run_testthat.R [FILTER]
if (Sys.getenv("TESTTHAT_PARALLEL") == "") Sys.setenv(TESTTHAT_PARALLEL = "TRUE")
if (Sys.getenv("TESTTHAT_CPUS") == "") Sys.setenv(TESTTHAT_CPUS = "2")
args <- commandArgs(trailingOnly = TRUE)
filter <- if (length(args)) args[[1]] else NULL
res <- testthat::test_local(".", filter = filter, reporter = c("summary", "fail"),
                            stop_on_failure = FALSE)
df <- as.data.frame(res)
failed <- sum(df$failed) + sum(df$error)
cat(sprintf("testthat: %d passed, %d failed, %d skipped\n", sum(df$passed), failed, sum(df$skipped)))
# a parallel run reports a few ms for every test (the main session's wait), not the tests' times
if (toupper(Sys.getenv("TESTTHAT_PARALLEL")) %in% c("FALSE", "F", "0")) {
  by_file <- sort(tapply(df$real, df$file, sum), decreasing = TRUE)
  cat("slowest testthat files (wall s):\n")
  cat(sprintf("%7.1f  %s\n", head(by_file, 10), names(head(by_file, 10))), sep = "")
  slowest <- head(df[order(-df$real), c("real", "file", "test")], 10)
  cat("slowest testthat tests (wall s):\n")
  cat(sprintf("%7.1f  %s: %s\n", slowest$real, slowest$file, slowest$test), sep = "")
}
if (failed > 0 || (Sys.getenv("TPUESTIMATOR_FORCE_TESTS") == "1" && sum(df$skipped) > 0)) {
  quit(status = 1)
}
