"""TF1 leftovers in a model module: what `tpuestimator check` reports before importing it.

The module's source is parsed (never imported: a TF1 module often fails at import under
TensorFlow 2.21, where `tf.estimator` and `tf.contrib` are gone) and every use of a TF1 API
is resolved through the module's own imports (`import tensorflow.compat.v1 as tf` makes
`tf.layers` TF1's layers). Each finding names its replacement, as docs/MIGRATING.md gives it.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os

GUIDE = "docs/MIGRATING.md"

# (rule, what it matches on the resolved dotted name, replacement). The first matching rule
# wins, so the specific ones come before `tf.compat.v1`.
RULES = (
    ("tf.estimator", ("tensorflow.estimator", "tensorflow_estimator"),
     "tpuestimator.Estimator(model_fn(params) -> tpuestimator.ModelSpec, RunConfig(...)); "
     "TPUEstimatorSpec -> ModelSpec, ModeKeys -> none (the model function is called once)"),
    ("tf.layers", ("tensorflow.layers",),
     "keras.layers (tf.layers.Conv2D -> keras.layers.Conv2D, tf.layers.dense(x, n) -> keras.layers.Dense(n)(x))"),
    ("tf.train.get_global_step", ("tensorflow.train.get_global_step", "tensorflow.train.get_or_create_global_step"),
     "no global step in the model function: a keras.optimizers.schedules schedule receives it, "
     "optimizer.iterations holds it, estimator.global_step reads it"),
    ("CrossShardOptimizer", ("tensorflow.tpu.CrossShardOptimizer", "tensorflow.contrib.tpu.CrossShardOptimizer"),
     "nothing: the distribution strategy sums the replicas' gradients; return the bare Keras optimizer"),
    ("tf.contrib", ("tensorflow.contrib",),
     "tf.contrib was removed in TF 2.0: CrossShardOptimizer -> nothing (the strategy sums gradients), "
     "tf.contrib.tpu.TPUEstimator -> tpuestimator.Estimator, tf.contrib.summary -> tf.summary via porting.HostCall"),
    ("tf.metrics", ("tensorflow.metrics",),
     "tpuestimator.porting.metrics (same arguments) with porting.eval_metrics, or keras.metrics"),
    ("tf.losses", ("tensorflow.losses",),
     "a per-example keras.losses loss with reduction=None (the Estimator averages over the global batch)"),
    ("tf.train optimizer", ("tensorflow.train.*Optimizer", "tensorflow.train.*_decay", "tensorflow.train.piecewise_constant"),
     "keras.optimizers (GradientDescentOptimizer -> SGD, AdamOptimizer -> Adam) with a "
     "keras.optimizers.schedules schedule (exponential_decay -> ExponentialDecay)"),
    ("tf.placeholder / tf.Session", ("tensorflow.placeholder", "tensorflow.Session"),
     "no placeholders or sessions: inputs come from input_fn(params); for export, porting.placeholder "
     "inside porting.serving_input"),
    ("tf.compat.v1", ("tensorflow.compat.v1",),
     "the TensorFlow 2 API of the same name (tf.compat.v1 keeps graph-mode code that cannot run in the "
     "Estimator's tf.function steps)"),
)


@dataclasses.dataclass(frozen=True)
class Leftover:
    """One TF1 API use: `line` in the module, the `code` as written, its `rule` and `replacement`."""

    line: int
    code: str
    rule: str
    replacement: str

    def message(self) -> str:
        return f"line {self.line}: {self.code} ({self.rule}) -> {self.replacement}"


def _matches(dotted: str, pattern: str) -> bool:
    if "*" in pattern:
        prefix, _, suffix = pattern.partition("*")
        head, _, last = dotted.rpartition(".")
        return head + "." == prefix and last.endswith(suffix) and last != suffix
    return dotted == pattern or dotted.startswith(pattern + ".")


def _rule_for(dotted: str, written: str):
    """The rule for a resolved name; `tf.compat.v1` only where the code spells it (a module
    imported as `tf` from tensorflow.compat.v1 is reported once, at its import)."""
    compat = dotted == "tensorflow.compat.v1" or dotted.startswith("tensorflow.compat.v1.")
    plain = "tensorflow" + dotted[len("tensorflow.compat.v1"):] if compat else dotted
    for rule, patterns, replacement in RULES:
        if rule == "tf.compat.v1":
            if compat and "compat" in written:
                return rule, replacement
            continue
        if any(_matches(plain, p) for p in patterns):
            return rule, replacement
    return None


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def find_leftovers(source: str, filename: str = "<model module>") -> list[Leftover]:
    """Every TF1 API use in `source` (one per line and rule), in line order.

    Raises:
      SyntaxError: the source does not parse.
    """
    tree = ast.parse(source, filename=filename)
    aliases: dict[str, str] = {}
    found: dict[tuple[int, str], Leftover] = {}

    def add(line: int, code: str, dotted: str) -> None:
        hit = _rule_for(dotted, code)
        if hit and (line, hit[0]) not in found:
            found[(line, hit[0])] = Leftover(line, code, hit[0], hit[1])

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ("tensorflow", "tensorflow_estimator"):
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
                    add(node.lineno, f"import {alias.name}", alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] in ("tensorflow", "tensorflow_estimator"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    aliases[alias.asname or alias.name] = full
                    add(node.lineno, f"from {node.module} import {alias.name}", full)
    # the longest attribute chains only: `tf.layers.Conv2D`, not also `tf.layers`
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or id(node) in inner:
            continue
        parts = _dotted(node)
        if not parts or parts[0] not in aliases:
            continue
        add(node.lineno, ".".join(parts), ".".join([aliases[parts[0]], *parts[1:]]))
    return sorted(found.values(), key=lambda f: (f.line, f.rule))


def model_module_path(model: str) -> str | None:
    """The source file of a config's `module:function` model (None: a built-in name, or a
    module that cannot be found without importing it)."""
    if not isinstance(model, str) or ":" not in model:
        return None
    module_name = model.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None) if spec else None
    return origin if origin and origin.endswith(".py") and os.path.isfile(origin) else None


def module_leftovers(path: str) -> list[Leftover]:
    with open(path, encoding="utf-8") as fh:
        return find_leftovers(fh.read(), filename=path)
