#!/usr/bin/env bash
# Lints the Python (ruff, configured under [tool.ruff] in pyproject.toml) and the R code
# (lintr, configured in .lintr) of the repository. Exits non-zero on any finding.
#
#   bash scripts/lint.sh          # check only
#   bash scripts/lint.sh --fix    # apply ruff's safe fixes first, then check
#
# Needs: the project's Python (.venv/bin/python, else python3); ruff is pip-installed into it
# when missing. R's lintr package (Debian: apt-get install r-cran-lintr).
set -uo pipefail
cd "$(dirname "$0")/.."

fix=0
for arg in "$@"; do
  case "$arg" in
    --fix) fix=1 ;;
    *) echo "usage: bash scripts/lint.sh [--fix]" >&2; exit 2 ;;
  esac
done

# Not $PYTHON: that names the interpreter the set-up makes .venv from (scripts/base_python.sh),
# and a system Python refuses the pip install of ruff below (externally managed).
if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
status=0

echo "== ruff"
ruff_spec=$(sed -n 's/.*"\(ruff[^"]*\)".*/\1/p' pyproject.toml | head -n 1)
if ! "$python" -m ruff --version >/dev/null 2>&1; then
  echo "ruff is missing from $python: pip-installing ${ruff_spec:-ruff}"
  if ! "$python" -m pip install -q "${ruff_spec:-ruff}"; then
    echo "error: could not install ruff (pip install '${ruff_spec:-ruff}' into the project's .venv)" >&2
    exit 2
  fi
fi
paths=(python tests benchmarks examples inst/python)
if [ "$fix" = 1 ]; then
  "$python" -m ruff check --no-cache --fix "${paths[@]}" || true
fi
"$python" -m ruff check --no-cache "${paths[@]}" || status=1

echo "== lintr"
if ! Rscript -e 'quit(status = if (requireNamespace("lintr", quietly = TRUE)) 0 else 1)' >/dev/null 2>&1; then
  echo "error: the R package lintr is missing: apt-get install r-cran-lintr (Debian/Ubuntu), or" \
       "install.packages(\"lintr\")" >&2
  status=1
else
  # The checkout's own namespace (not an older installed tpuestimatorr) for object_usage_linter.
  Rscript -e 'pkgload::load_all(".", helpers = FALSE, quiet = TRUE); lints <- lintr::lint_package("."); if (length(lints)) { print(lints); cat(length(lints), "lintr finding(s)\n"); quit(status = 1) } else cat("lintr: no findings\n")' || status=1
fi
exit $status
