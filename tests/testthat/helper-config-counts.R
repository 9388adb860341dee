# How many times this R session's Python validates a config and resolves a data section: the
# core's own `config.validate` and `data.spec._resolve` wrapped to count their calls (nothing of
# TensorFlow's), put back when the calling test ends. Returns a function giving the counts so far
# as a list sorted by name (validate, resolve), zeros included.
local_config_counts <- function(env = parent.frame()) {
  reticulate::py_run_string(paste(
    "import collections, tpuestimator.config as _cfg, tpuestimator.data.spec as _spec",
    "_counts, _validate, _resolve = collections.Counter(), _cfg.validate, _spec._resolve",
    "def _counted_validate(*a, **k):\n    _counts['validate'] += 1\n    return _validate(*a, **k)",
    "def _counted_resolve(section):\n    _counts['resolve'] += 1\n    return _resolve(section)",
    "_cfg.validate, _spec._resolve = _counted_validate, _counted_resolve", sep = "\n"))
  withr::defer(reticulate::py_run_string("_cfg.validate, _spec._resolve = _validate, _resolve"), envir = env)
  function() {
    counts <- reticulate::py_eval("{'resolve': _counts['resolve'], 'validate': _counts['validate']}")
    counts[order(names(counts))]
  }
}
