"""`RunConfig`: how and where an Estimator runs.

Its defaults are the config file's defaults (`tpuestimator.config.DEFAULTS`, the one source
of defaults, which `config.schema.json` validates): each field names its config key in its
metadata, so `RunConfig.from_job` is derived from the fields, never a hand-kept mapping, and
its rules are the schema's: a `RunConfig` from a job's config is not checked again (the config
was validated when it was loaded); one a library user makes is checked by the schema's rules for
the config keys its fields name.
"""
from __future__ import annotations

import dataclasses

from tpuestimator.config import DEFAULTS
from tpuestimator.config_views import PsPartition, parse_view
from tpuestimator.errors import ConfigError


def _from_config(key: str):
    """A dataclass field whose default is the config's default for `key` ('section.name')."""
    section, name = key.split(".")
    return dataclasses.field(default=DEFAULTS[section][name], metadata={"config": key})


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """How and where an Estimator runs. Batch sizes are GLOBAL (all replicas together)."""

    model_dir: str
    train_batch_size: int = _from_config("train.batch_size")
    eval_batch_size: int = _from_config("eval.batch_size")
    predict_batch_size: int = _from_config("predict.batch_size")
    iterations_per_loop: int = _from_config("train.iterations_per_loop")
    save_checkpoints_steps: int | None = _from_config("train.save_checkpoints_steps")
    keep_checkpoint_max: int = _from_config("train.keep_checkpoint_max")
    async_checkpoint: bool = _from_config("train.async_checkpoint")
    strategy: str = _from_config("run.strategy")
    num_cpu_devices: int | None = _from_config("run.num_cpu_devices")
    tpu: str | None = _from_config("run.tpu")
    zone: str | None = _from_config("run.zone")
    project: str | None = _from_config("run.project")
    precision: str = _from_config("run.precision")
    jit_compile: bool = _from_config("run.jit_compile")
    seed: int | None = _from_config("run.seed")
    nan_sentinel: bool = _from_config("debug.nan_sentinel")
    warm_start_from: str | None = _from_config("train.warm_start_from")
    ps_steps_per_invocation: int = _from_config("run.ps_steps_per_invocation")
    ps_partition: PsPartition | None = _from_config("run.ps_partition")

    # True when the values come from a validated `JobConfig` (`from_job`): the schema checked them.
    checked: dataclasses.InitVar[bool] = False

    def __post_init__(self, checked: bool):
        if not self.model_dir:
            raise ConfigError("model_dir", self.model_dir, "a folder for checkpoints")
        if not checked:  # a library user's values: checked by the schema's rules for their config keys
            self._check_against_schema()
        # a dict (a library user's) parsed once into the typed view the config gives
        object.__setattr__(self, "ps_partition", parse_view(PsPartition, self.ps_partition, "run.ps_partition"))

    def _check_against_schema(self) -> None:
        """The fields that are set, validated as the config keys they name (one set of rules: the
        schema's); None is a library user's "not set" (e.g. no periodic checkpoints)."""
        from tpuestimator.config import validate

        sections: dict[str, dict] = {}
        for field in dataclasses.fields(self):
            key, value = field.metadata.get("config"), getattr(self, field.name)
            if key and value is not None:
                if isinstance(value, PsPartition):
                    value = {k: v for k, v in dataclasses.asdict(value).items() if v is not None}
                section, name = key.split(".")
                sections.setdefault(section, {})[name] = value
        validate(sections, partial=True)

    @classmethod
    def from_job(cls, job, model_dir: str | None = None) -> RunConfig:
        """Builds a RunConfig from a `tpuestimator.config.JobConfig` (every field from its config key)."""
        values = {}
        for field in dataclasses.fields(cls):
            key = field.metadata.get("config")
            if key:
                section, name = key.split(".")
                values[field.name] = getattr(getattr(job, section), name)
        return cls(model_dir=model_dir or job.model_dir, checked=True, **values)  # validated when loaded
