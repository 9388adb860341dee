# The real tfruns (rstudio/tfruns, vendored in ../shared/vendor with a stub of the `config`
# package it imports), installed once per test session into a scratch library. CI has the
# vendor folder; without it the tests that need the real package are skipped and the stand-in
# (test-tfruns.R) covers what tpuestimatorr calls.

vendor_dir <- function() {
  for (cand in c(file.path(fixtures_dir() %||% "", "..", "..", "..", "shared", "vendor"),
                 file.path(fixtures_dir() %||% "", "..", "..", "shared", "vendor"))) {
    if (file.exists(file.path(cand, "README.md")) &&
        length(Sys.glob(file.path(cand, "tfruns_*.tar.gz")))) return(normalizePath(cand))
  }
  NULL
}

.real_tfruns <- new.env(parent = emptyenv())

# Prefixes the library path with a library holding the real tfruns (installed on first use).
local_real_tfruns <- function(env = parent.frame()) {
  vendor <- vendor_dir()
  if (is.null(vendor)) {
    skip("../shared/vendor (the real tfruns) is not here; test-tfruns.R's stand-in covers tpuestimatorr's calls")
  }
  missing_deps <- Filter(function(p) !requireNamespace(p, quietly = TRUE),
                         c("whisker", "tidyselect", "rstudioapi", "base64enc", "magrittr"))
  if (length(missing_deps)) {
    skip_or_fail(paste("the real tfruns needs the Debian packages r-cran-", missing_deps, collapse = ", "))
  }
  lib <- .real_tfruns$lib
  if (is.null(lib)) {
    lib <- tempfile("tfruns-real-lib-")
    dir.create(lib)
    flags <- c("--no-test-load", "--no-byte-compile", "--no-docs", "--no-html", "--no-help")
    for (pkg in c(file.path(vendor, "config-stub"), Sys.glob(file.path(vendor, "tfruns_*.tar.gz"))[[1]])) {
      out <- system2(file.path(R.home("bin"), "R"), c("CMD", "INSTALL", flags, paste0("--library=", shQuote(lib)),
                                                       shQuote(pkg)), stdout = TRUE, stderr = TRUE)
      if (!is.null(attr(out, "status"))) stop("could not install ", pkg, ":\n", paste(out, collapse = "\n"))
    }
    .real_tfruns$lib <- lib
  }
  if (isNamespaceLoaded("tfruns") && isTRUE(attr(asNamespace("tfruns"), "stub"))) unloadNamespace("tfruns")
  withr::local_libpaths(lib, action = "prefix", .local_envir = env)
  # unloaded again before the library path is restored (defers run last in, first out), so the
  # stand-in tests of test-tfruns.R do not find the real one loaded
  withr::defer(try(unloadNamespace("tfruns"), silent = TRUE), envir = env)
  loadNamespace("tfruns")
}

# A scratch working folder for a page's tfruns lines, the real tfruns installed and its viewer
# recording the comparison pages it is asked to show: returns a function giving those pages.
local_tfruns_page <- function(env = parent.frame()) {
  local_real_tfruns(env)
  work <- local_work_dir(env)
  withr::local_envvar(R_USER_CACHE_DIR = file.path(work, ".cache"), .local_envir = env)
  shown <- character()
  withr::local_options(tpuestimatorr.verbose = FALSE, tfruns.viewer = function(url) shown <<- c(shown, url),
                       .local_envir = env)
  function() shown
}
