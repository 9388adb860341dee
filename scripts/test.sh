#!/usr/bin/env bash
# Every test: set up (system packages, then Python with the beam, R-bridge and docs extras, then
# the R package), then pytest, testthat, R CMD check, the linters (ruff, lintr) and the docs sites.
# Usage: scripts/test.sh [--setup-only | --plan] [PYTEST_ARGS...]
#   --setup-only  set up, then stop;  --plan  print the set-up steps in order, run nothing
# TPUESTIMATOR_FORCE_TESTS=1 turns skips into failures (CI sets it); TPUESTIMATOR_TEST_WORKERS
# sets pytest's worker processes (default 2, one per core here; 0 runs in one process).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=test
case "${1:-}" in
  --setup-only) mode=setup; shift ;;
  --plan) mode=plan; shift ;;
esac

step() {
  echo "== set-up: $1: ${*:2}"
  [ "$mode" = plan ] || "${@:2}"
}
# R and the system libraries first: the Python `r` extra (rpy2) compiles against R.
step "system packages" bash scripts/setup_system.sh python r browser lint datasets
step "python" bash scripts/setup_python.sh dev beam r docs
step "R package" bash scripts/setup_r.sh
[ "$mode" = test ] || exit 0

export TPUESTIMATORR_PYTHON="$PWD/.venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
export TPUESTIMATOR_FIXTURES="$PWD/tests/fixtures"
export PATH="$PWD/.venv/bin:$PATH"
workers=${TPUESTIMATOR_TEST_WORKERS:-2}
status=0
timed() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@" || status=$?
  echo "== $name: $((SECONDS - start)) s"
}
timed pytest .venv/bin/python -m pytest tests/python -q -p no:cacheprovider -n "$workers" --dist loadgroup --durations=15 "$@"
# R CMD check, the linters and the docs sites (mkdocs --strict, pkgdown, checked in Chromium) run beside testthat, their output held back until testthat ends:
# each is one R or Python process using about one core, so together they take about the time of
# testthat alone (they took 165-195 s after it). They share no folder: the check builds in its
# own temporary copy, its vignettes write under tempdir().
side_log=$(mktemp)
( status=0; timed "R CMD check" bash scripts/r_check.sh; timed lint bash scripts/lint.sh
  timed "docs sites" bash scripts/build_docs.sh; exit $status ) >"$side_log" 2>&1 &
side=$!
timed testthat Rscript -e 'res <- testthat::test_local(".", reporter = c("summary", "fail"), stop_on_failure = FALSE); df <- as.data.frame(res); cat(sprintf("testthat: %d passed, %d failed, %d skipped\n", sum(df$passed), sum(df$failed) + sum(df$error), sum(df$skipped))); if (sum(df$failed) + sum(df$error) > 0 || (Sys.getenv("TPUESTIMATOR_FORCE_TESTS") == "1" && sum(df$skipped) > 0)) quit(status = 1)'
wait "$side" || status=1
cat "$side_log"
rm -f "$side_log"
echo "== total: $SECONDS s"
exit $status
