# The R package's side of the Python link: the version check and the bridge module
# (inst/python/tpuestimatorr_bridge).

test_that("a supported tpuestimator version passes the check", {
  check <- tpuestimatorr:::check_tpuestimator_version
  supported <- c(min = "0.1.0", below = "0.2.0")
  expect_identical(check("0.1.0", supported), "0.1.0")
  expect_identical(check("0.1.7", supported), "0.1.7")
  expect_identical(check("0.1.0.dev3", supported), "0.1.0.dev3")
})

test_that("a too old or too new tpuestimator is refused, naming both versions and the fix", {
  check <- tpuestimatorr:::check_tpuestimator_version
  supported <- c(min = "0.1.0", below = "0.2.0")
  expect_error(check("0.0.9", supported, python = "/opt/py/bin/python"),
               paste0("needs the tpuestimator Python package >= 0\\.1\\.0 and < 0\\.2\\.0, but the Python in use ",
                      "\\(/opt/py/bin/python\\) has tpuestimator 0\\.0\\.9\\.\nRun install_tpuestimator\\(\\)"),
               class = "tpuestimator_version_error")
  err <- tryCatch(check("0.2.0", supported), error = function(e) e)
  expect_s3_class(err, "tpuestimator_error")
  expect_match(conditionMessage(err), "has tpuestimator 0.2.0.", fixed = TRUE)
  expect_match(conditionMessage(err), "install_tpuestimator()", fixed = TRUE)
  expect_match(conditionMessage(err), paste0("tpuestimatorr ", utils::packageVersion("tpuestimatorr")), fixed = TRUE)
  expect_error(check("1.0.0", supported), "has tpuestimator 1.0.0", class = "tpuestimator_version_error")
  expect_error(check("0.2.0rc1", supported), "has tpuestimator 0.2.0rc1", class = "tpuestimator_version_error")
  expect_error(check("unknown", supported), "has tpuestimator unknown", class = "tpuestimator_version_error")
  expect_error(check(NA_character_, supported), "\\(unknown version\\)", class = "tpuestimator_version_error")
})

test_that("the installed tpuestimator is one this R package supports", {
  skip_if_no_tpuestimator()
  core <- tpuestimatorr:::py_core()
  version <- reticulate::py_to_r(core$`__version__`)
  expect_identical(tpuestimatorr:::check_tpuestimator_version(version), version)
  expect_identical(reticulate::py_to_r(tpuestimatorr:::py_bridge()$tpuestimator_version()), version)
})

test_that("the bridge module ships with the package and round-trips values through strict JSON", {
  expect_true(file.exists(system.file("python", "tpuestimatorr_bridge", "__init__.py", package = "tpuestimatorr")))
  skip_if_no_tpuestimator()
  value <- list(a = 1L, b = c(1.5, NA), c = list(d = "x"), e = NULL, f = TRUE)
  py <- tpuestimatorr:::r_to_py_json(value)
  expect_identical(reticulate::py_str(py$`__class__`$`__name__`), "dict")
  back <- tpuestimatorr:::py_to_r_json(py, simplify = FALSE)
  expect_identical(back$a, 1L)
  expect_identical(back$c$d, "x")
  expect_null(back$e)
  expect_identical(back$b, list(1.5, NULL))
  expect_identical(tpuestimatorr:::py_to_r_json(py)$b, c(1.5, NA))
})

test_that("R arrays reach numpy with the same indexing and dtype", {
  skip_if_no_tpuestimator()
  x <- array(as.double(1:24), dim = c(2, 3, 4))
  a <- tpuestimatorr:::r_to_numpy(x)
  expect_identical(reticulate::py_str(a$dtype), "float32")
  expect_identical(unlist(tpuestimatorr:::py_to_r_json(a$shape, simplify = FALSE)), c(2L, 3L, 4L))
  expect_equal(tpuestimatorr:::py_to_r_json(a$`__getitem__`(reticulate::tuple(1L, 2L, 3L))), x[2, 3, 4])
  m <- matrix(c(TRUE, FALSE, TRUE, TRUE), 2)
  b <- tpuestimatorr:::r_to_numpy(m)
  expect_identical(reticulate::py_str(b$dtype), "int64")
  expect_identical(tpuestimatorr:::py_to_r_json(b$tolist()), matrix(c(1L, 0L, 1L, 1L), 2))
  s <- tpuestimatorr:::r_to_numpy(factor(c("b", "a")))
  expect_identical(tpuestimatorr:::py_to_r_json(s$tolist()), c("b", "a"))
})

test_that("DESCRIPTION states the supported tpuestimator versions the check uses", {
  versions <- tpuestimatorr:::supported_python_versions
  requirements <- gsub("\\s+", " ", utils::packageDescription("tpuestimatorr")$SystemRequirements)
  expect_match(requirements, paste0("tpuestimator package (>= ", versions[["min"]], ", < ", versions[["below"]]),
               fixed = TRUE)
})

test_that("install_tpuestimator() always installs one TensorFlow build", {
  expect_equal(tpuestimator_extras(NULL), "tensorflow")
  expect_equal(tpuestimator_extras("beam"), c("tensorflow", "beam"))
  expect_equal(tpuestimator_extras(c("cpu", "beam")), c("cpu", "beam"))
  expect_equal(tpuestimator_extras("tpu"), "tpu")
  expect_error(tpuestimator_extras("bogus"), "`extra` must be NULL or some of.*bogus")
  expect_error(tpuestimator_extras(c("cpu", "gpu")), "more than one TensorFlow build \\(cpu, gpu\\)")
})

test_that("Python ints beyond R's 32-bit integers reach R as doubles: condition fields, hooks, progress", {
  # reticulate wrapped them into negative R integers (issue 19.9); fixed in the bridge for every
  # value it converts directly, not only a disk-full error's free_bytes
  skip_if_no_tpuestimator()
  big <- 2^33 + 1
  err <- tryCatch(
    tpuestimatorr:::with_python(reticulate::py_run_string(paste0(
      "from tpuestimator.errors import DataError\n",
      "raise DataError('cut', path='x.tfrecord', record=2**33 + 1)"
    ))),
    error = function(e) e
  )
  expect_s3_class(err, "tpuestimator_data_error")
  expect_identical(err$record, big)
  seen <- new.env()
  hook <- tpuestimatorr:::as_hook_list(list(function(event, info) seen$info <- info))[[1]]
  logs <- reticulate::py_eval("{'examples_seen': 2**33 + 1, 'loss': 0.5, 'small': 3}", convert = FALSE)
  hook$after_loop(reticulate::py_eval("2**31", convert = FALSE), logs)
  expect_identical(seen$info$step, 2^31)
  expect_identical(seen$info$examples_seen, big)
  expect_identical(seen$info$small, 3L)
  progress <- tpuestimatorr:::py_bridge()$r_callback(
    reticulate::r_to_py(function(event, info) seen$progress <- info, convert = TRUE)
  )
  progress$`__call__`("loop", reticulate::py_eval("{'step': 3000000000}", convert = FALSE))
  expect_identical(seen$progress$step, 3e9)
})
