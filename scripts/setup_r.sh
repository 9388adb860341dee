#!/usr/bin/env bash
# Installs R and the R package's dependencies from Debian's r-cran-* packages (CRAN is not
# needed) through scripts/setup_system.sh, then installs tpuestimatorr from this checkout.
# Idempotent. Installs into R's site library, or into R_LIBS_USER where that is not writable.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_system.sh r
log=$(mktemp)
trap 'rm -f "$log"' EXIT
lib=$(Rscript -e 'cat(.libPaths()[1])')
args=()
if [ ! -w "$lib" ]; then
  lib=$(Rscript -e 'cat(path.expand(Sys.getenv("R_LIBS_USER")))')
  mkdir -p "$lib"
  args=(-l "$lib")
fi
R CMD INSTALL --no-test-load "${args[@]}" . >"$log" 2>&1 || {
  cat "$log" >&2
  echo "setup: R CMD INSTALL of tpuestimatorr into $lib failed (log above)" >&2
  exit 1
}
