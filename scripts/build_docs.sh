#!/usr/bin/env bash
# Builds both documentation sites and checks them in headless Chromium:
# mkdocs (the guides and the Python API reference, `mkdocs build --strict`: a broken link, a
# missing page or an unresolved docstring reference fails it) at the root of OUT, pkgdown (the R
# package's reference and vignettes, offline: no CRAN look-ups) under OUT/r, then
# scripts/check_site.py (every local link and image resolves; four pages rendered by Chromium
# carry their headings; screenshots into SHOTS when given).
# Usage: scripts/build_docs.sh [OUT [SHOTS]]   (OUT defaults to a temporary folder, removed after)
# TPUESTIMATORR_VIGNETTE_CODE=false: the vignettes' code is shown, not run (scripts/test.sh, whose
# R CMD build has run it; a site to publish leaves it unset).
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON_BIN:-.venv/bin/python}
out=${1:-}
if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
NO_MKDOCS_2_WARNING=1 "$py" -m mkdocs build --strict --quiet -d "$out"
# pkgdown installs the package into a temporary library and knits the vignettes (their code runs
# when TPUESTIMATORR_PYTHON names the Python core, as in R CMD build).
Rscript -e 'options(pkgdown.internet = FALSE)' \
        -e 'pkgdown::build_site(".", examples = FALSE, preview = FALSE, override = list(destination = commandArgs(TRUE)[[1]]))' \
        "$out/r" >"$out/pkgdown.log" 2>&1 || { cat "$out/pkgdown.log"; exit 1; }
rm -f "$out/pkgdown.log"
"$py" scripts/check_site.py "$out" ${2:+"$2"}
