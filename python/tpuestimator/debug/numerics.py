"""Check-numerics mode (`debug.check_numerics: true`) and reading its error messages.

`tf.debugging.enable_check_numerics()` instruments every op traced (and executed eagerly)
after it is called; the first op whose float output holds NaN or Inf raises an
`InvalidArgumentError` whose message names the op type, the graph node and the stack of the
op's creation. `parse_check_numerics_error` turns that message into a dict (op name, op type,
NaN/Inf, graph, the source line), used by `tpuestimator debug replay` and by the job, which
re-raises it as a `NonFiniteError` naming the op.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

MARKER = "Detected Infinity or NaN"

_HEADER = re.compile(r"!!! Detected Infinity or NaN in output (\d+) of (graph|eagerly-executing) op "
                     r"\"([^\"]+)\"(?: \(# of outputs: (\d+)\))? !!!")
_NODE = re.compile(r"\[\[\{\{node ([^}]+)\}\}\]\]")
_KIND = re.compile(r"Tensor had (NaN|-?Inf|\+?Inf|NaN and Inf|Inf and NaN)[^\n]*values")
_GRAPH = re.compile(r'Graph name: "([^"]+)"')
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_SHORT_FRAME = re.compile(r"^\s*\+ (.+?) \(L(\d+)\) (\S+)\s*$")
_DTYPE = re.compile(r"dtype: <dtype: '([^']+)'>")
_SHAPE = re.compile(r"^\s*shape: (.+)$", re.M)

# Frames inside these packages are the machinery, not the line a user would fix.
# tpuestimator's own modules count as machinery too, except the built-in model functions.
_LIBRARY_PARTS = ("/tensorflow/", "/keras/", "/tf_keras/", "/absl/", "/tensorboard/", "/numpy/", "<frozen ",
                  "/_pytest/", "/pluggy/", "/runpy.py", "/threading.py")


def is_check_numerics_error(exc: BaseException) -> bool:
    return MARKER in str(exc)


def _is_library(path: str) -> bool:
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/tpuestimator
    p = os.path.abspath(path) if os.path.isabs(path) else path
    if p.startswith(package + os.sep) and not p.startswith(os.path.join(package, "models") + os.sep):
        return True
    p = p.replace("\\", "/")
    return any(part in p for part in _LIBRARY_PARTS)


def parse_check_numerics_error(message: str) -> dict[str, Any] | None:
    """Reads a check-numerics error message.

    Returns:
      None when the message is not a check-numerics error; else a dict with `op_type`
      (e.g. ``MatMul``), `op_name` (the graph node, e.g. ``mlp/dense_1/MatMul``; None for an
      eager op), `output_slot`, `kind` (``NaN``, ``Inf``, ``-Inf``), `graph` (the tf.function),
      `dtype`, `shape`, `source` ({file, line, function}: the innermost frame of the op's
      creation, usually inside the layer's implementation), `user_source` (the innermost frame
      outside TensorFlow, Keras and the Estimator: the model code to look at, or None) and
      `frames` (the full creation stack, outermost first).
    """
    if MARKER not in message:
        return None
    out: dict[str, Any] = {"op_type": None, "op_name": None, "output_slot": None, "kind": None, "graph": None,
                           "dtype": None, "shape": None, "source": None, "user_source": None, "frames": []}
    m = _HEADER.search(message)
    if m:
        out["output_slot"] = int(m.group(1))
        out["op_type"] = m.group(3)
        out["eager"] = m.group(2) != "graph"
    m = _NODE.search(message)
    if m:
        node = m.group(1)
        out["op_name"] = node[: -len("/CheckNumericsV2")] if node.endswith("/CheckNumericsV2") else node
    m = _KIND.search(message)
    if m:
        out["kind"] = m.group(1).lstrip("+")
    for key, rx in (("graph", _GRAPH), ("dtype", _DTYPE), ("shape", _SHAPE)):
        m = rx.search(message)
        if m:
            out[key] = m.group(1).strip()
    # Full paths come in the "Detected at node ... defined at" block (graph ops); the short
    # "+ ...path (Lnn) fn" block is all there is for eager ops.
    block = message
    start = message.find("defined at (most recent call last):")
    if start >= 0:
        block = message[start:]
        end = block.find("!!! Detected")
        block = block[:end] if end >= 0 else block
    frames = [{"file": f, "line": int(n), "function": fn} for f, n, fn in _FRAME.findall(block)]
    if not frames:
        for line in message.splitlines():
            m = _SHORT_FRAME.match(line)
            if m:
                frames.append({"file": m.group(1), "line": int(m.group(2)), "function": m.group(3)})
    unique = frames
    out["frames"] = unique
    if unique:
        out["source"] = unique[-1]
        user = [fr for fr in unique if not _is_library(fr["file"])]
        out["user_source"] = user[-1] if user else None
    return out


def describe(found: dict[str, Any]) -> str:
    """One paragraph naming the op, what it produced and where it was created."""
    op = found.get("op_name") or found.get("op_type") or "an op"
    kind = found.get("kind") or "NaN/Inf"
    text = f"the first op that produced {kind} is `{op}`"
    if found.get("op_type") and found.get("op_name"):
        text += f" ({found['op_type']}, output {found.get('output_slot', 0)})"
    if found.get("graph"):
        text += f" in tf.function `{found['graph']}`"
    src = found.get("user_source") or found.get("source")
    if src:
        text += f", created at {src['file']}:{src['line']} ({src['function']})"
        lib = found.get("source")
        if found.get("user_source") and lib and lib != src:
            text += f" via {lib['file']}:{lib['line']} ({lib['function']})"
    return text


@contextlib.contextmanager
def check_numerics(enabled: bool = True) -> Iterator[None]:
    """Turns on `tf.debugging.enable_check_numerics()` for the block (a no-op when disabled).

    Must wrap the building/tracing of the functions to check (it instruments at trace time).
    It is switched off again at the end, so later jobs in the same process (an R session)
    run at full speed.
    """
    if not enabled:
        yield
        return
    import tensorflow as tf

    tf.debugging.enable_check_numerics()
    logger.info("check-numerics mode on: every op is checked for NaN/Inf (slow; for debugging)")
    try:
        yield
    finally:
        tf.debugging.disable_check_numerics()


@contextlib.contextmanager
def translate_errors(step_of: Any = None) -> Iterator[None]:
    """Re-raises a check-numerics `InvalidArgumentError` as a `NonFiniteError` naming the op.

    Args:
      step_of: an object with `global_step` (the Estimator), for the error's step.
    """
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - only check-numerics errors are translated
        found = parse_check_numerics_error(str(exc)) if MARKER in str(exc) else None
        if found is None:
            raise
        from tpuestimator.errors import NonFiniteError

        step = None
        try:
            step = int(step_of.global_step) if step_of is not None else None
        except Exception:  # noqa: BLE001
            step = None
        latest = None
        try:
            latest = step_of.latest_checkpoint() if step_of is not None else None
        except Exception:  # noqa: BLE001
            latest = None
        error = NonFiniteError(
            f"debug.check_numerics stopped training in the loop that started at global step {step}: {describe(found)}. "
            f"The last finite checkpoint is {latest or 'none'}.",
            step=step if step is not None else -1, what=f"op {found.get('op_name') or found.get('op_type')}",
            last_good_checkpoint=latest)
        error.op = found
        raise error from exc
