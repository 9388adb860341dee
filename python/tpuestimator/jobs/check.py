"""`tpuestimator check`: TPU readiness, rehearsed on a CPU.

A TPU needs global batches that divide by its cores, fully static shapes and ops XLA can
compile. Each check here proves one of those on this machine: arithmetic on the batch
sizes, the input pipeline's static element spec, and one training step (and one forward
pass) compiled with XLA (`jit_compile=True`), the compiler TPUs use.
"""
from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping
from typing import Any

from tpuestimator.config import JobConfig, load_config

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    op: str | None = None
    field: str | None = None


@dataclasses.dataclass
class CheckReport:
    results: list[CheckResult]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if not r.ok]

    def to_dict(self) -> dict:
        return {"ok": self.ok, "results": [dataclasses.asdict(r) for r in self.results]}


_OP_PATTERNS = (
    re.compile(r"Detected unsupported operations[^:]*:\s*(?P<op>\w+)\s*\(No registered"),
    re.compile(r"No registered '(?P<op>\w+)' OpKernel for XLA"),
    re.compile(r"(?P<op>\w+) op(?:eration)? .*?(?:compile-time constant|dynamic shape)", re.S),
)
_NODE_PATTERN = re.compile(r"\{\{node ([^}]+)\}\}")


def _op_from_error(message: str) -> tuple[str | None, str | None]:
    op = None
    for pattern in _OP_PATTERNS:
        m = pattern.search(message)
        if m:
            op = m.group("op")
            break
    node = _NODE_PATTERN.search(message)
    return op, node.group(1) if node else None


def _dynamic_shape_ops(graph) -> list[tuple[str, str, str]]:
    """Ops whose outputs have data-dependent (unknown) dimensions although every input is static."""
    import tensorflow as tf

    found = []
    for op in graph.get_operations():
        for out in op.outputs:
            if out.dtype in (tf.resource, tf.variant, tf.string) or op.type in ("Placeholder", "ReadVariableOp"):
                continue
            if out.shape.rank is None or not out.shape.is_fully_defined():
                found.append((op.type, op.name, str(out.shape)))
                break
    return found


def _static_shape_check(forward, features) -> CheckResult:
    """Traces the forward pass with fully static inputs and finds ops whose shapes depend on data.

    XLA on a CPU pads some data-dependent shapes to bounds and compiles them anyway; a TPU
    program with them recompiles or fails, so they are reported here by name.
    """
    import tensorflow as tf

    specs = {k: tf.TensorSpec(v.shape, v.dtype) for k, v in features.items()}
    graph = tf.function(forward).get_concrete_function(specs).graph
    dynamic = _dynamic_shape_ops(graph)
    if not dynamic:
        return CheckResult("model shapes are static", True, "every op's output shape is known at compile time")
    op_type, op_name, shape = dynamic[0]
    more = f" (and {len(dynamic) - 1} more)" if len(dynamic) > 1 else ""
    return CheckResult("model shapes are static", False,
                       f"op {op_type} ({op_name}) has a data-dependent output shape {shape}{more}: its size depends "
                       "on the values, not the shapes, of its inputs. TPUs need static shapes: replace it with a "
                       "fixed-size alternative (masks instead of tf.boolean_mask/tf.where, "
                       "tf.math.unsorted_segment_* instead of tf.unique)", op=op_type)


def tf1_leftovers_check(model) -> CheckResult | None:
    """TF1 APIs left in the model function's module (parsed, not imported), each with its
    replacement from docs/MIGRATING.md; None for a built-in model or a module not found."""
    import inspect

    from tpuestimator.porting.tf1_leftovers import GUIDE, model_module_path, module_leftovers

    path = model_module_path(model) if isinstance(model, str) else None
    if callable(model):
        try:
            path = inspect.getsourcefile(model)
        except TypeError:
            path = None
    if not path or path.startswith("<"):
        return None
    try:
        found = module_leftovers(path)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return CheckResult("model module has no TF1 leftovers", False, f"cannot read {path}: {exc}", field="model")
    if not found:
        return CheckResult("model module has no TF1 leftovers", True, f"{path} uses TensorFlow 2 APIs only")
    lines = "".join(f"\n    {leftover.message()}" for leftover in found)
    return CheckResult("model module has no TF1 leftovers", False,
                       f"{path} still uses {len(found)} TF1 API(s) that TensorFlow 2.21 lacks or that cannot run in "
                       f"the Estimator's steps; replace each as {GUIDE} shows:{lines}", field="model")


def check_config(config: str | Mapping[str, Any] | JobConfig, *, overrides=(), num_cores: int = 8,
                 model_fn=None) -> CheckReport:
    """Runs every TPU-readiness check for a job config.

    Args:
      num_cores: the TPU core count to rehearse (a v2/v3-8 has 8).
      model_fn: overrides the config's model function.
    """
    import tensorflow as tf

    from tpuestimator import data
    from tpuestimator.core.estimator import Estimator, RunConfig
    from tpuestimator.jobs.from_config import input_fn_for, model_params
    from tpuestimator.spec import Mode, split_element

    cfg = config if isinstance(config, JobConfig) else load_config(config, overrides)
    results: list[CheckResult] = []
    for section, batch in (("train", cfg.train.batch_size), ("eval", cfg.eval.batch_size),
                           ("predict", cfg.predict.batch_size)):
        ok = batch % num_cores == 0
        results.append(CheckResult(
            f"{section}.batch_size divides by {num_cores} cores", ok,
            f"{batch} = {num_cores} x {batch // num_cores}" if ok else
            f"{batch} is not a multiple of {num_cores}; use {max(num_cores, round(batch / num_cores) * num_cores)}",
            field=f"{section}.batch_size"))

    per_core = max(1, cfg.train.batch_size // num_cores)
    train_fn = input_fn_for(cfg, "train")
    params = {**cfg.params, "batch_size": per_core, "mode": "train", "input_context": None, "seed": 0, "start_step": 0}
    with data.translate_errors(cfg.data, "train"):
        dataset = train_fn(params)
    element = dataset.element_spec
    features_spec, labels_spec = split_element(element)
    dynamic = {name: str(s.shape) for name, s in {**features_spec, "labels": labels_spec}.items()
               if s is not None and not s.shape.is_fully_defined()}
    results.append(CheckResult(
        "input shapes are static", not dynamic,
        "every training batch is " + ", ".join(f"{k} {s.shape}" for k, s in features_spec.items())
        if not dynamic else "dynamic dimensions in " + ", ".join(f"{k} {v}" for k, v in dynamic.items())
        + ": batch with drop_remainder=True and give every feature a fixed shape", field="data"))

    import shutil
    import tempfile

    leftovers = tf1_leftovers_check(model_fn or cfg.model)
    if leftovers is not None:
        results.append(leftovers)
    scratch = tempfile.mkdtemp(prefix="tpuestimator-check-")
    try:
        estimator = Estimator(model_fn or cfg.model, RunConfig(model_dir=scratch, strategy="cpu",
                                                                train_batch_size=per_core, eval_batch_size=per_core,
                                                                predict_batch_size=per_core, nan_sentinel=False,
                                                                precision=cfg.run.precision),
                              model_params(cfg))
        estimator.build(train_fn, Mode.TRAIN, global_batch=per_core)
    except Exception as exc:
        if leftovers is None or leftovers.ok:
            raise
        # A TF1 model module rarely imports or builds under TensorFlow 2: the leftovers say why.
        shutil.rmtree(scratch, ignore_errors=True)
        first = (str(exc).splitlines() or [""])[0][:300]
        results.append(CheckResult("model function builds", False,
                                   f"{type(exc).__name__}: {first} (port the TF1 leftovers above first)",
                                   field="model"))
        return CheckReport(results)
    spec = estimator.spec
    model = spec.model
    features, labels = split_element(next(iter(dataset.take(1))))

    def train_step(features, labels):
        with tf.GradientTape() as tape:
            outputs = estimator.call_model(features, training=True)
            loss = tf.reduce_mean(tf.cast(spec.loss(labels, outputs), tf.float32))
        grads = tape.gradient(loss, model.trainable_variables)
        return loss, [g for g in grads if g is not None]

    def forward(features):
        outputs = estimator.call_model(features, training=False)
        return spec.predictions(outputs) if spec.predictions else outputs

    results.append(_static_shape_check(forward, features))
    for name, fn, args in (("training step compiles with XLA", train_step, (features, labels)),
                           ("prediction compiles with XLA", forward, (features,))):
        try:
            compiled = tf.function(fn, jit_compile=True)
            out = compiled(*args)
            shapes = [t.shape for t in tf.nest.flatten(out)]
            results.append(CheckResult(name, True, f"compiled; outputs {', '.join(str(s) for s in shapes[:3])}"))
        except (tf.errors.OpError, ValueError, TypeError) as exc:
            message = str(exc)
            op, node = _op_from_error(message)
            first = next((line for line in message.splitlines() if line.strip()), message)[:300]
            where = f" (op {op}" + (f", node {node}" if node else "") + ")" if op or node else ""
            results.append(CheckResult(name, False, f"XLA cannot compile it{where}: {first}. Ops with data-dependent "
                                       "output shapes (tf.unique, tf.boolean_mask, tf.where with one argument) do not "
                                       "run on TPUs; use fixed-size alternatives (masks, tf.math.unsorted_segment_*)",
                                       op=op or node))
    shutil.rmtree(scratch, ignore_errors=True)
    return CheckReport(results)
