#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages a set-up step needs, before anything compiles against
# them (rpy2 builds against R, so R comes first). Idempotent: installed packages are skipped,
# and a machine that has them all needs neither root nor network.
# Usage: scripts/setup_system.sh GROUP...   groups: python, r, browser, lint, datasets
#   python   venv support and headers for the Python virtualenv
#   r        R and the R package's dependencies from Debian's r-cran-* packages (CRAN not needed)
#   browser  Chromium, for the HTML run-report tests
#   lint     lintr, for scripts/lint.sh
#   datasets Fashion-MNIST's IDX files (dataset-fashion-mnist, in /usr/share/datasets/fashion-mnist),
#            for the fashion_mnist example's tests and benchmarks
#   package:NAME  one more Debian package by name
set -euo pipefail

fail() {
  echo "setup: $*" >&2
  exit 1
}

packages=()
for group in "$@"; do
  case "$group" in
    python) packages+=(python3-venv python3-dev) ;;
    # knitr, rmarkdown and pandoc build the vignettes, pkgdown the R package's site; whisker ... magrittr are what the real
    # tfruns (../shared/vendor, installed by the tests into a scratch library) imports.
    r) packages+=(r-base-core r-base-dev r-cran-reticulate r-cran-testthat r-cran-jsonlite r-cran-yaml
                  r-cran-processx r-cran-withr r-cran-rlang r-cran-roxygen2 r-cran-callr
                  r-cran-knitr r-cran-rmarkdown pandoc r-cran-pkgdown
                  r-cran-whisker r-cran-tidyselect r-cran-rstudioapi r-cran-base64enc r-cran-magrittr) ;;
    browser) packages+=(chromium) ;;
    lint) packages+=(r-cran-lintr) ;;
    datasets) packages+=(dataset-fashion-mnist) ;;
    package:?*) packages+=("${group#package:}") ;;
    *) fail "unknown package group '$group' (choose from: python, r, browser, lint, datasets)" ;;
  esac
done

# The python group is only needed when the Python .venv is made from cannot make a virtualenv with pip.
source "$(dirname "$0")/base_python.sh"
PY=$BASE_PYTHON
if [[ " ${packages[*]:-} " == *" python3-venv "* ]] && "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  packages=("${packages[@]/python3-venv/}")
  packages=("${packages[@]/python3-dev/}")
fi

missing=()
for p in "${packages[@]}"; do
  [ -n "$p" ] || continue
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 ||
    fail "these packages are missing and this is not a Debian/Ubuntu machine (no apt-get): ${missing[*]}. Install their equivalents with your system's package manager, then rerun."
  if [ "$(id -u)" -eq 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
  else
    fail "installing ${missing[*]} needs root: rerun as root, or run: sudo apt-get install ${missing[*]}"
  fi
  echo "setup: apt-get install ${missing[*]}" >&2
  "${sudo[@]}" apt-get update -qq --error-on=any >/tmp/tpuestimator-apt-update.log 2>&1 ||
    fail "apt-get update failed (no network, or no reachable Debian mirror?): see /tmp/tpuestimator-apt-update.log. Packages still needed: ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/tmp/tpuestimator-apt-install.log 2>&1 ||
    fail "apt-get install ${missing[*]} failed: see /tmp/tpuestimator-apt-install.log"
fi

for group in "$@"; do
  if [ "$group" = r ]; then
    command -v R >/dev/null 2>&1 ||
      fail "R is installed (r-base-core) but not on PATH: add its folder (usually /usr/bin) to PATH"
  fi
done
