# install_tpuestimator() for real: reticulate::virtualenv_create() makes a new virtualenv and pip
# installs the project into it, with no package index (PIP_NO_INDEX): the project's wheel, built
# first, is the only thing pip may find (PIP_FIND_LINKS). `--no-deps` keeps TensorFlow and the
# rest out (a second TensorFlow cost about 30 CPU s; the wheel test in test_distribution.py
# installs the requirements); what is checked is that the virtualenv is made and the package
# imports from it.

test_that("install_tpuestimator() creates its virtualenv and installs tpuestimator into it, with no index", {
  python <- skip_if_no_python_exe()
  work <- withr::local_tempdir("install-")
  # What a build needs of the checkout, copied: setuptools writes its egg-info beside the sources.
  root <- normalizePath(testthat::test_path("..", ".."))
  source <- file.path(work, "source")
  dir.create(source)
  file.copy(file.path(root, c("pyproject.toml", "README.md", "python")), source, recursive = TRUE)
  unlink(list.files(source, "__pycache__", recursive = TRUE, include.dirs = TRUE, full.names = TRUE),
         recursive = TRUE)
  wheels <- file.path(work, "wheels")
  # As pip builds it for users: an isolated build with the setuptools pyproject.toml asks for
  # (from the index pip is configured with, as test_distribution.py's wheel test builds).
  built <- system2(python, c("-m", "pip", "wheel", "-q", "--no-deps", "-w", shQuote(wheels), shQuote(source)),
                   stdout = TRUE, stderr = TRUE)
  wheel <- list.files(wheels, "^tpuestimator-.*\\.whl$")
  expect_length(wheel, 1L)
  if (length(wheel) != 1L) fail(paste(built, collapse = "\n"))
  base <- system2(python, c("-c", shQuote("import sys; print(sys._base_executable)")), stdout = TRUE)

  withr::local_envvar(PIP_NO_INDEX = "1", PIP_FIND_LINKS = wheels, PIP_CONFIG_FILE = "/dev/null",
                      PYTHONPATH = NA, VIRTUAL_ENV = NA)
  envdir <- file.path(work, "r-tpuestimator")
  expect_false(reticulate::virtualenv_exists(envdir))
  # path = NA: the index branch, `tpuestimator[tensorflow]>=MIN,<BELOW`, which only the wheel fills
  out <- utils::capture.output(expect_message(
    exe <- install_tpuestimator(envname = envdir, python = base, path = NA, pip_options = c("--no-deps", "-q")),
    "Installed tpuestimator into .*r-tpuestimator"
  ))
  expect_true(file.exists(file.path(envdir, "pyvenv.cfg")))
  expect_identical(normalizePath(exe), normalizePath(file.path(envdir, "bin", "python")))
  code <- "import tpuestimator; print(tpuestimator.__file__); print(tpuestimator.__version__)"
  found <- system2(exe, c("-c", shQuote(code)), stdout = TRUE)
  expect_true(startsWith(found[[1]], file.path(normalizePath(envdir), "lib")), info = found[[1]])
  expect_identical(found[[2]], as.character(utils::packageVersion("tpuestimatorr")))
  # A second call finds the virtualenv and leaves it: the same Python.
  utils::capture.output(suppressMessages(
    again <- install_tpuestimator(envname = envdir, python = base, path = NA, pip_options = c("--no-deps", "-q"))
  ))
  expect_identical(again, exe)
})
