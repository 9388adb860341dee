#!/usr/bin/env bash
# The main job on the bundled example: set up, then train the digits CNN, evaluate it on
# every eval example, export a SavedModel and record the run (runs/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_python.sh
work=${WORK_DIR:-work-out}
mkdir -p "$work"
cd "$work"
../.venv/bin/tpuestimator example digits --out digits
../.venv/bin/tpuestimator train digits/digits.yaml "$@"
../.venv/bin/tpuestimator runs ls --latest 1 || true
