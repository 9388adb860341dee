#!/usr/bin/env bash
# Creates .venv with TensorFlow (CPU) and tpuestimator installed in editable mode.
# Usage: scripts/setup_python.sh [EXTRA...]   e.g. scripts/setup_python.sh dev beam r
# Idempotent: a stamp records what was installed; rerunning with the same inputs is instant.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TF_SPEC=${TF_SPEC:-"tensorflow-cpu==2.21.*"}
extras=("$@")

if ! "$PY" -c 'import sys; assert (3, 10) <= sys.version_info[:2] <= (3, 11)' 2>/dev/null; then
  echo "tpuestimator needs Python 3.10 or 3.11 (reticulate 1.28 and TensorFlow 2.21); found: $("$PY" --version 2>&1)" >&2
  echo "set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if ! "$PY" -m venv --help >/dev/null 2>&1 || ! "$PY" -c 'import ensurepip' 2>/dev/null; then
  echo "installing python3-venv (Debian)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv python3-dev >/dev/null
fi

stamp_input="$(cat pyproject.toml) $TF_SPEC ${extras[*]:-}"
stamp=$(printf '%s' "$stamp_input" | sha256sum | cut -c1-16)
if [ -f .venv/.tpuestimator-stamp ] && [ "$(cat .venv/.tpuestimator-stamp)" = "$stamp" ] \
   && .venv/bin/python -c 'import tpuestimator, tensorflow' 2>/dev/null; then
  exit 0
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# tensorflow-cpu stands in for the `tensorflow` the package declares (same modules, no GPU
# code); pip would otherwise fetch both, so the package goes in with --no-deps and its other
# requirements are read from pyproject.toml.
.venv/bin/python -m pip install -q "$TF_SPEC"
reqs=$(.venv/bin/python - "${extras[@]}" <<'PYEOF'
import sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
deps = [d for d in project["dependencies"] if not d.startswith("tensorflow")]
for extra in sys.argv[1:]:
    deps += project["optional-dependencies"][extra]
print("\n".join(deps))
PYEOF
)
printf '%s\n' "$reqs" > .venv/requirements.txt
.venv/bin/python -m pip install -q -r .venv/requirements.txt
.venv/bin/python -m pip install -q --no-deps -e .
.venv/bin/python -c 'import tensorflow as tf, tpuestimator; print("TensorFlow", tf.__version__, "| tpuestimator", tpuestimator.__version__)'
echo "$stamp" > .venv/.tpuestimator-stamp
