#!/usr/bin/env bash
# The main job on the bundled example: set up, then train the digits CNN, evaluate it on
# every eval example, export a SavedModel and record the run (runs/).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_python.sh
cli="$PWD/.venv/bin/tpuestimator"
work=${WORK_DIR:-work-out}
mkdir -p "$work"
cd "$work"
"$cli" example digits --out digits
"$cli" train digits/digits.yaml "$@"
"$cli" runs ls --latest 1
