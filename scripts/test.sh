#!/usr/bin/env bash
# Every test: set up (system packages, then Python with the beam, R-bridge and docs extras, then
# the R package), then pytest, testthat, R CMD check, the linters (ruff, lintr) and the docs sites.
# Usage: scripts/test.sh [--setup-only | --plan | --quick] [PYTEST_ARGS...]
#   --setup-only  set up, then stop;  --plan  print the set-up steps in order, run nothing
#   --quick       the quick tier, for working between full runs (under 3 minutes): the pytest
#                 tests marked `quick` and the testthat files named in tests/quick_testthat.txt
#                 (a fast test of every sub-package and every R file, test_quick_tier.py keeps
#                 it so), then the linters; no R CMD check. Set-up runs only where it is not done.
# TPUESTIMATOR_FORCE_TESTS=1 turns skips into failures (CI sets it); TPUESTIMATOR_TEST_WORKERS
# sets pytest's worker processes (0 runs in one process). The default is 3 on these 2 cores: a
# worker waiting on a process it started leaves its core to another (2 workers left a quarter
# of a core idle). That pays only because TensorFlow's idle threads sleep in the test processes
# (tests/python/tensorflow_threads.py): with them spinning, 3 workers took 460 s and 875 CPU s.
# Whole runs alternating, 3 workers then 2 (2026-12-05): 312/333, 387/397, 386/424, 393/395 s;
# 3 workers use 3-9% more CPU. The quick tier keeps 2 (its 41 tests: a third worker's start-up
# cost more than it saved). testthat runs its files in TESTTHAT_CPUS parallel R sessions
# (default 2; scripts/run_testthat.R).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=test
case "${1:-}" in
  --setup-only) mode=setup; shift ;;
  --plan) mode=plan; shift ;;
  --quick) mode=quick; shift ;;
esac

step() {
  echo "== set-up: $1: ${*:2}"
  [ "$mode" = plan ] || "${@:2}"
}
# R and the system libraries first: the Python `r` extra (rpy2) compiles against R.
# The installed R package (child R processes load it) is rebuilt when its sources change.
r_sources_hash() { cat DESCRIPTION NAMESPACE R/*.R $(find inst -type f | sort) | sha256sum | cut -c1-16; }
r_stamp=build/r-package.stamp
if [ "$mode" = quick ] && .venv/bin/python -c "import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ('tpuestimator', 'tensorflow', 'pytest', 'xdist')))" 2>/dev/null \
    && [ "$(cat "$r_stamp" 2>/dev/null)" = "$(r_sources_hash)" ]; then
  echo "== set-up: done already (the venv has tpuestimator and TensorFlow; the R package matches its sources)"
else
  step "system packages" bash scripts/setup_system.sh python r browser lint datasets
  step "python" bash scripts/setup_python.sh dev beam r docs
  step "R package" bash scripts/setup_r.sh
  [ "$mode" = plan ] || { mkdir -p build && r_sources_hash > "$r_stamp"; }
fi
[ "$mode" = test ] || [ "$mode" = quick ] || exit 0

export TPUESTIMATORR_PYTHON="$PWD/.venv/bin/python"
export TF_CPP_MIN_LOG_LEVEL=2
export TPUESTIMATOR_FIXTURES="$PWD/tests/fixtures"
export PATH="$PWD/.venv/bin:$PATH"
# testthat's R sessions see Python as a user of the core install does: scikit-learn (a dev extra,
# for pytest's own answers) hidden, so Keras does not import it in each of them (1-1.5 CPU s).
r_python_path="$PWD/tests/python/without_sklearn${PYTHONPATH:+:$PYTHONPATH}"
workers=${TPUESTIMATOR_TEST_WORKERS:-3}
status=0
timed() {
  local name=$1 start=$SECONDS
  shift
  echo "== $name"
  "$@" || status=$?
  echo "== $name: $((SECONDS - start)) s"
}
if [ "$mode" = quick ]; then
  quick_r=$(sed 's/#.*//; s/^test-//; s/\.R *$//' tests/quick_testthat.txt | grep -v '^ *$' | paste -sd'|')
  timed "pytest (quick)" .venv/bin/python -m pytest tests/python -q -p no:cacheprovider -m quick \
    -n "${TPUESTIMATOR_TEST_WORKERS:-2}" \
    --dist loadgroup --durations=5 "$@"
  side_log=$(mktemp)
  ( status=0; timed lint bash scripts/lint.sh; exit $status ) >"$side_log" 2>&1 &
  side=$!
  timed "testthat (quick)" env PYTHONPATH="$r_python_path" Rscript scripts/run_testthat.R "^($quick_r)\$"
  wait "$side" || status=1
  cat "$side_log"
  rm -f "$side_log"
  echo "== total: $SECONDS s"
  exit $status
fi
timed pytest .venv/bin/python -m pytest tests/python -q -p no:cacheprovider -n "$workers" --dist loadgroup --durations=15 "$@"
# R CMD check, the linters and the docs sites (mkdocs --strict, pkgdown, checked in Chromium) run beside testthat, their output held back until testthat ends:
# each is one R or Python process using about one core, so together they take about the time of
# testthat alone (they took 165-195 s after it). They share no folder: the check builds in its
# own temporary copy, its vignettes write under tempdir().
side_log=$(mktemp)
( status=0; timed "R CMD check" bash scripts/r_check.sh; timed lint bash scripts/lint.sh
  # the site's vignettes show their code without running it: R CMD build ran it just before (~28 s)
  timed "docs sites" env TPUESTIMATORR_VIGNETTE_CODE=false bash scripts/build_docs.sh; exit $status ) >"$side_log" 2>&1 &
side=$!
timed testthat env PYTHONPATH="$r_python_path" Rscript scripts/run_testthat.R
wait "$side" || status=1
cat "$side_log"
rm -f "$side_log"
echo "== total: $SECONDS s"
exit $status
