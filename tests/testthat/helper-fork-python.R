# The local clusters' tasks as forks of one Python that imported TensorFlow once
# (tests/python/fork_python.py, pytest's `forked_python`): tpu_train(cluster = ) starts each
# task as `sys.executable -m tpuestimator train ...`, and with sys.executable the fork server's
# launcher each task is still a real process (its own TF_CONFIG, ports, exit status, files) that
# skips TensorFlow's import (~5-7 CPU s a task). One server per test session, started on first
# use from this R session's Python (so with its environment, as the tasks get it) and stopped
# when the session's tests end. Where tests/python is not here (installed tests, R CMD check)
# the tasks start from the plain Python. test-parity.R's Python side runs in a fork of it too.

.fork_python <- new.env(parent = emptyenv())

fork_python_script <- function() {
  for (cand in c(testthat::test_path("..", "python", "fork_python.py"),
                 file.path(Sys.getenv("TPUESTIMATOR_FIXTURES"), "..", "python", "fork_python.py"))) {
    if (file.exists(cand)) return(normalizePath(cand))
  }
  NULL
}

# The fork server's launcher (a `python` whose runs are forks of it), the server started on first
# use; NULL where fork_python.py is not here.
forked_python_launcher <- function() {
  script <- fork_python_script()
  if (is.null(script)) return(NULL)
  if (is.null(.fork_python$launcher)) {
    fork_python <- reticulate::import_from_path("fork_python", dirname(script), convert = FALSE)
    folder <- tempfile("fork-python-")
    dir.create(folder)
    os <- reticulate::import("os", convert = FALSE)
    started <- fork_python$start(reticulate::import("pathlib", convert = FALSE)$Path(folder),
                                 reticulate::import_builtins(convert = FALSE)$dict(os$environ))
    .fork_python$server <- started[0L]
    withr::defer(fork_python$stop(.fork_python$server), envir = testthat::teardown_env())
    .fork_python$launcher <- reticulate::py_str(started[1L])
  }
  .fork_python$launcher
}

# Sets this session's sys.executable to the fork server's launcher until `env` ends; returns the
# launcher's path (NULL where fork_python.py is not here: sys.executable is left as it is).
local_forked_python <- function(env = parent.frame()) {
  launcher <- forked_python_launcher()
  if (is.null(launcher)) return(invisible(NULL))
  sys <- reticulate::import("sys", convert = FALSE)
  before <- reticulate::py_to_r(sys$executable)
  reticulate::py_set_attr(sys, "executable", launcher)
  withr::defer(reticulate::py_set_attr(sys, "executable", before), envir = env)
  invisible(launcher)
}
