"""The rules across a config's fields that a JSON Schema cannot express (`check_semantics`):
`train.steps` or `train.max_steps`, checkpoints and evaluations at loop boundaries, the data a
format needs, a TPU's name, evaluation data for early stopping and the best export."""
from __future__ import annotations

import os

from tpuestimator.errors import ConfigError


def check_semantics(cfg: dict, source: str | None) -> None:
    """Checks the rules a schema cannot express."""
    train, data, run = cfg["train"], cfg["data"], cfg["run"]
    from tpuestimator.models import BUILTIN

    if cfg["model"] not in BUILTIN and ":" not in cfg["model"]:
        raise ConfigError("model", cfg["model"], "a built-in model (" + ", ".join(sorted(BUILTIN))
                          + ") or 'module:function' naming your own model function", source=source)
    if train["steps"] is not None and train["max_steps"] is not None:
        raise ConfigError("train.steps", train["steps"],
                          "either `train.steps` (incremental) or `train.max_steps` (absolute), not both; "
                          "set the other to null", source=source)
    if train["save_checkpoints_steps"] % train["iterations_per_loop"] != 0:
        raise ConfigError("train.save_checkpoints_steps", train["save_checkpoints_steps"],
                          f"a multiple of train.iterations_per_loop ({train['iterations_per_loop']}): "
                          "checkpoints are written at loop boundaries", source=source)
    every = cfg["eval"]["every_n_steps"]
    if every is not None and every % train["iterations_per_loop"] != 0:
        raise ConfigError("eval.every_n_steps", every,
                          f"a multiple of train.iterations_per_loop ({train['iterations_per_loop']}): "
                          "evaluation happens at loop boundaries", source=source)
    if "format" not in data and "manifest" not in data:
        raise ConfigError("data.format", None, "one of 'mnist', 'flowers', 'features', or a `data.manifest`",
                          source=source)
    if data.get("format") == "features" and not data.get("features") and "manifest" not in data:
        raise ConfigError("data.features", None, "a mapping of feature name to {dtype, shape} when data.format is 'features'",
                          source=source)
    if data.get("format") in ("mnist", "flowers") and "image" not in data and "manifest" not in data:
        raise ConfigError("data.image", None, "{height, width, channels} for image records", source=source)
    if run["strategy"] == "tpu" and not run["tpu"] and not os.environ.get("TPU_NAME"):
        raise ConfigError("run.tpu", None, "the TPU name or grpc:// address (or 'local' on a TPU VM) when run.strategy is 'tpu'",
                          source=source)
    if run["num_cpu_devices"] is not None and run["strategy"] not in ("auto", "cpu", "mirrored"):
        raise ConfigError("run.num_cpu_devices", run["num_cpu_devices"],
                          "null unless run.strategy is auto, cpu or mirrored (logical CPU devices rehearse TPU cores)",
                          source=source)
    es = cfg["eval"]["early_stopping"]
    if es and not data.get("eval") and "manifest" not in data:
        raise ConfigError("eval.early_stopping", es, "a `data.eval` pattern to evaluate on", source=source)
    exporters = cfg["export"]["exporters"]
    if "best" in exporters and not data.get("eval") and "manifest" not in data:
        raise ConfigError("export.exporters", exporters, "'best' only with a `data.eval` pattern", source=source)
