"""Debugging training: TensorFlow 2's successors of tfdbg, wired to the config's `debug` section.

Importing `tpuestimator.debug` does not import TensorFlow.

- NaN/Inf sentinel report + repro bundle (`sentinel.write_report`, called by the Estimator;
  `sentinel.NonFiniteReportHook` for `Estimator.train(hooks=...)` outside a job),
  replay of a bundle's step with check-numerics (`replay.replay_bundle`,
  `tpuestimator debug replay BUNDLE`).
- `debug.check_numerics: true` -> `numerics.check_numerics()` around the job, and a check-
  numerics error becomes a `NonFiniteError` naming the op (`numerics.translate_errors`).
- `debug.dump` -> `dumps.DumpHook` (Debugger V2 dumps of steps a..b).
- `debug.watch` -> `tpuestimator.hooks.watch.WatchHook`; `debug.profile_steps` ->
  `tpuestimator.hooks.profiler.ProfilerHook`.
- `hooks_from_config(debug_section, ...)` builds those hooks for a job.
- Input assertions (`data.assertions`: finite, min, max, shape) stop bad records at the input
  pipeline, before they reach the model: see `tpuestimator.data`.

Layer 5: may import the contracts, `core`, `data`, `runs` and `hooks`; never serving, jobs,
cluster or commands.
"""
from __future__ import annotations

import importlib
import os
from typing import Any

_EXPORTS = {
    "DumpHook": "dumps",
    "summarize_dump": "dumps",
    "check_numerics": "numerics",
    "parse_check_numerics_error": "numerics",
    "translate_errors": "numerics",
    "replay_bundle": "replay",
    "find_first_nonfinite": "replay",
    "write_report": "sentinel",
    "NonFiniteReportHook": "sentinel",
}

__all__ = sorted([*_EXPORTS, "hooks_from_config"])


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"tpuestimator.debug.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module 'tpuestimator.debug' has no attribute {name!r}")


def hooks_from_config(debug: Any, *, logdir: str | None, model_dir: str,
                      base_dir: str | None = None) -> list:
    """The hooks a config's `debug` section asks for (dump, watch, profile_steps).

    Args:
      debug: the config's typed `debug` section (`cfg.debug`).
      logdir: the run's TensorBoard logs folder (profiles go to `<logdir>/plugins/profile`);
        None without a run record: `<model_dir>/logs`.
      model_dir: the model dir (a relative `debug.dump.dir` is taken from the working folder).
    """
    hooks: list = []
    dump = debug.dump  # a `config_views.DumpSpec`
    if dump:
        from tpuestimator.debug.dumps import DumpHook
        from tpuestimator.errors import ConfigError

        if not dump.steps:
            raise ConfigError("debug.dump.steps", dump.steps,
                              "the steps to dump, [first, last] (dumping every step is too slow and too large)")
        directory = dump.dir
        if base_dir and not os.path.isabs(directory):
            directory = os.path.join(base_dir, directory)
        hooks.append(DumpHook(directory, dump.steps, mode=dump.mode, op_regex=dump.op_regex))
    watch = debug.watch  # a `config_views.WatchSpec`
    if watch:
        from tpuestimator.hooks.watch import WatchHook

        hooks.append(WatchHook(watch.outputs, first_n=watch.first_n, summarize=watch.summarize,
                               every_n_loops=watch.every_n_loops))
    if debug.profile_steps:
        from tpuestimator.hooks.profiler import ProfilerHook

        hooks.append(ProfilerHook(logdir or os.path.join(model_dir, "logs"), debug.profile_steps))
    return hooks
