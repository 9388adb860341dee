# Skips that become failures in CI: with TPUESTIMATOR_FORCE_TESTS=1 nothing is skipped silently.

force_tests <- function() identical(Sys.getenv("TPUESTIMATOR_FORCE_TESTS"), "1")

skip_or_fail <- function(message) {
  if (force_tests()) {
    testthat::fail(paste0("TPUESTIMATOR_FORCE_TESTS=1 but this test would be skipped: ", message))
    testthat::skip(paste("(failed above)", message))
  }
  testthat::skip(message)
}

skip_if_no_tpuestimator <- function() {
  available <- tryCatch(reticulate::py_module_available("tpuestimator"), error = function(e) FALSE)
  if (!isTRUE(available)) {
    skip_or_fail(paste0(
      "the tpuestimator Python package is not available (set TPUESTIMATORR_PYTHON to a Python ",
      "that has it, e.g. the repo's .venv/bin/python)"
    ))
  }
  invisible(TRUE)
}

skip_if_no_fixtures <- function() {
  if (is.null(fixtures_dir())) {
    skip_or_fail("the shared fixtures (tests/fixtures) were not found: set TPUESTIMATOR_FIXTURES")
  }
  invisible(TRUE)
}

skip_if_no_python_exe <- function() {
  python <- tpuestimatorr::tpuestimator_python()
  if (is.null(python) || !file.exists(python)) skip_or_fail("no Python executable found for subprocesses")
  invisible(python)
}

skip_if_no_fashion_mnist <- function() {
  folder <- "/usr/share/datasets/fashion-mnist"
  files <- file.path(folder, paste0(c("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                      "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"), ".gz"))
  if (!all(file.exists(files))) {
    skip_or_fail(paste("Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist",
                       "(scripts/setup_system.sh datasets)"))
  }
  invisible(folder)
}
