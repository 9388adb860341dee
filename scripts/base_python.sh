# Sourced by setup_system.sh and setup_python.sh: sets BASE_PYTHON, the Python .venv is made from.
#
# $PYTHON when set. Else the system's own python3 (/usr/bin/python3: Debian's or Ubuntu's build)
# when it is 3.10 or 3.11 and complete (venv, ensurepip and its C headers, which rpy2 builds
# against). Else the python3 on PATH.
# The system's build before a python3 earlier on PATH: a Python built from source with pyenv's
# defaults (the one first on PATH on this project's CI machines) took 1.6 times the CPU to import
# TensorFlow and about 9% more for each training job (docs/contributing.md, Tests).
system_python_is_complete() {
  /usr/bin/python3 -c 'import os, sys, sysconfig, venv, ensurepip
assert (3, 10) <= sys.version_info[:2] <= (3, 11)
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' >/dev/null 2>&1
}
if [ -n "${PYTHON:-}" ]; then
  BASE_PYTHON=$PYTHON
elif system_python_is_complete; then
  BASE_PYTHON=/usr/bin/python3
else
  BASE_PYTHON=python3
fi
