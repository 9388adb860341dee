#!/usr/bin/env bash
# Installs R and the R package's dependencies from Debian's r-cran-* packages (CRAN is not
# needed), Chromium for the HTML report tests, then installs tpuestimatorr from this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PKGS=(r-base-core r-base-dev r-cran-reticulate r-cran-testthat r-cran-jsonlite r-cran-yaml r-cran-processx
      r-cran-withr r-cran-rlang r-cran-roxygen2 r-cran-callr chromium)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "apt-get install ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
R CMD INSTALL --no-test-load . >/dev/null 2>.venv/r-install.log || { cat .venv/r-install.log >&2; exit 1; }
