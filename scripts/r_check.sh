#!/usr/bin/env bash
# R CMD check of tpuestimatorr (tests run separately by scripts/test.sh): fails on any ERROR
# or WARNING. The package is built from the checkout's files only (not .venv), so the build
# stays fast. R CMD build builds the vignettes (knitr; their code runs when the Python core is
# available, i.e. with TPUESTIMATORR_PYTHON set, and a failing chunk fails the build); the check
# neither builds them again nor reruns their code (--no-vignettes: that second run trained
# every vignette model a second time), but still checks the built vignettes are there.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/src"
git ls-files -co --exclude-standard -z | xargs -0 -I{} cp --parents {} "$work/src/" 2>/dev/null || true
(cd "$work" && R CMD build src >build.log 2>&1) || { cat "$work/build.log"; exit 1; }
tarball=$(ls "$work"/tpuestimatorr_*.tar.gz)
# tfruns (Suggests) is not in Debian; the real one is vendored beside the checkout
# (../shared/vendor, as the tfruns tests use it). Installed into a scratch library, it lets the
# check see every suggested package, so "Package suggested but not available: 'tfruns'" is no NOTE.
for vendor in "${TFRUNS_VENDOR:-}" ../shared/vendor shared/vendor; do
  if [ -n "$vendor" ] && ls "$vendor"/tfruns_*.tar.gz >/dev/null 2>&1 && [ -d "$vendor/config-stub" ]; then
    mkdir "$work/lib"
    for pkg in "$vendor/config-stub" "$(ls "$vendor"/tfruns_*.tar.gz | head -n 1)"; do
      R CMD INSTALL --no-test-load --no-byte-compile --no-docs -l "$work/lib" "$pkg" >>"$work/vendor.log" 2>&1 ||
        { cat "$work/vendor.log"; exit 1; }
    done
    export R_LIBS="$work/lib${R_LIBS:+:$R_LIBS}"
    break
  fi
done
(cd "$work" && _R_CHECK_FORCE_SUGGESTS_=false R CMD check --no-manual --no-tests --no-vignettes "$tarball" >check.log 2>&1) || true
grep -E "^Status:|^\* checking .*(NOTE|WARNING|ERROR)" "$work/check.log" || true
if ! grep -q "^Status:" "$work/check.log" || grep -qE "^Status:.*(ERROR|WARNING)" "$work/check.log"; then
  cat "$work/check.log"
  exit 1
fi
