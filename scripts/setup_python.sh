#!/usr/bin/env bash
# Creates .venv with TensorFlow (CPU) and tpuestimator installed in editable mode.
# Usage: scripts/setup_python.sh [EXTRA...]   e.g. scripts/setup_python.sh dev beam r
# Idempotent: a stamp records what was installed; rerunning with the same inputs is instant.
# The `r` extra (rpy2) compiles against R: run scripts/setup_system.sh r first.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/base_python.sh   # BASE_PYTHON: $PYTHON, else the system's complete python3, else python3
PY=$BASE_PYTHON
TF_SPEC=${TF_SPEC:-"tensorflow-cpu==2.21.*"}
extras=("$@")

fail() {
  echo "setup: $*" >&2
  exit 1
}

command -v "$PY" >/dev/null 2>&1 || fail "no '$PY' on PATH: install Python 3.10 or 3.11 (apt-get install python3), or set PYTHON=/path/to/python3.11"
"$PY" -c 'import sys; assert (3, 10) <= sys.version_info[:2] <= (3, 11)' 2>/dev/null ||
  fail "tpuestimator needs Python 3.10 or 3.11 (reticulate 1.28 and TensorFlow 2.21); found $("$PY" --version 2>&1) at $(command -v "$PY"). Set PYTHON=/path/to/python3.11"
bash scripts/setup_system.sh python

for extra in "${extras[@]}"; do
  if [ "$extra" = r ] && ! command -v R >/dev/null 2>&1; then
    fail "the 'r' extra (rpy2) is built against R, and R is not on PATH: run 'bash scripts/setup_system.sh r' first (scripts/test.sh does)"
  fi
done

# The cpu extra brings tensorflow-cpu; TF_SPEC pins its version (the default is the tested one).
# The stamp holds a hash of the inputs and the extras installed: a run asking for a subset of
# them (scripts/main.sh after scripts/test.sh) is instant and drops nothing.
hash=$(printf '%s' "$(cat pyproject.toml) $TF_SPEC" | sha256sum | cut -c1-16)
stamp=.venv/.tpuestimator-stamp
installed=()
if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$hash" ]; then
  read -r -a installed <<<"$(sed -n 2p "$stamp")"
fi
wanted=(cpu "${extras[@]}")
missing_extra=0
for extra in "${wanted[@]}"; do
  [[ " ${installed[*]:-} " == *" $extra "* ]] || missing_extra=1
done
# Both packages found, not imported: TensorFlow's import cost ~4.5 CPU s before every main job, and
# an install cut short leaves no stamp (it is written last), so the stamp vouches for the rest.
if [ "$missing_extra" = 0 ] && .venv/bin/python -c 'import importlib.util as u, sys
sys.exit(not all(u.find_spec(m) for m in ("tpuestimator", "tensorflow")))' 2>/dev/null; then
  exit 0
fi
# A .venv that is a link (a second checkout, such as a git worktree, sharing the first one's venv):
# `pip install -e .` here would re-point the shared editable install, and every other checkout
# using that venv, at this checkout. Refuse instead of installing.
if [ -L .venv ]; then
  fail ".venv is a link to $(readlink -f .venv), a virtualenv shared with another checkout, and it lacks what this set-up needs (extras: ${wanted[*]}). Installing here would re-point that checkout's editable install at this one. Run the set-up in the checkout that owns it, or give this checkout a venv of its own: rm .venv && bash scripts/setup_python.sh ${extras[*]:-}"
fi
all=$(printf '%s\n' "${installed[@]}" "${wanted[@]}" | grep -v '^$' | sort -u | tr '\n' ' ')
all_extras=$(echo $all | tr ' ' ',')
if [ ! -x .venv/bin/python ]; then
  echo "setup: making .venv from $(command -v "$PY") ($("$PY" --version 2>&1)); PYTHON=/path/to/python3.11 picks another"
  "$PY" -m venv .venv || fail "'$PY -m venv .venv' failed: install python3-venv (scripts/setup_system.sh python)"
fi
pip_install() {
  .venv/bin/python -m pip install -q "$@" >.venv/pip.log 2>&1 || {
    tail -n 20 .venv/pip.log >&2
    fail "pip install $* failed (no network, or no reachable package index?): full log in .venv/pip.log"
  }
}
pip_install --upgrade pip
pip_install "$TF_SPEC"
pip_install -e ".[$all_extras]"
.venv/bin/python -c 'import tensorflow as tf, tpuestimator; print("TensorFlow", tf.__version__, "| tpuestimator", tpuestimator.__version__)' 2>/dev/null
printf '%s\n%s\n' "$hash" "$all" > "$stamp"
