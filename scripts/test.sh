#!/usr/bin/env bash
# Every test: set up Python (with the beam and R-bridge extras) and R, then pytest and testthat.
# TPUESTIMATOR_FORCE_TESTS=1 turns skips into failures (CI sets it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_python.sh dev beam r
bash scripts/setup_r.sh
export TPUESTIMATORR_PYTHON="$PWD/.venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
export TPUESTIMATOR_FIXTURES="$PWD/tests/fixtures"
export PATH="$PWD/.venv/bin:$PATH"
status=0
echo "== pytest"
.venv/bin/python -m pytest tests/python -q -p no:cacheprovider "$@" || status=$?
echo "== testthat"
Rscript -e 'res <- testthat::test_local(".", reporter = c("summary", "fail"), stop_on_failure = FALSE); df <- as.data.frame(res); cat(sprintf("testthat: %d passed, %d failed, %d skipped\n", sum(df$passed), sum(df$failed) + sum(df$error), sum(df$skipped))); if (sum(df$failed) + sum(df$error) > 0 || (Sys.getenv("TPUESTIMATOR_FORCE_TESTS") == "1" && sum(df$skipped) > 0)) quit(status = 1)' || status=$?
echo "== R CMD check"
bash scripts/r_check.sh || status=$?
exit $status
