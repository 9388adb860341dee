"""Evaluation and prediction on the devices, as Orbit's `StandardEvaluator` beside its trainer.

`Evaluator.evaluate(input_fn, params, steps)` runs the eval loop over the input and returns the metrics;
`Evaluator.predict_batches(input_fn, params)` yields each batch's predictions with the padding removed.
Every example counts exactly once: several replicas, a TPU or several workers read padded,
masked batches of a static size (`tpuestimator.core.batching`); one replica on CPU or GPU reads
the batches as they come (the last one shorter, no mask), without the padding stage that cost
up to 30% of an evaluation of a small model.
"""
from __future__ import annotations

from collections.abc import Iterator

from tpuestimator.core import steps as replica_steps
from tpuestimator.core.batching import MASK_KEY, batch_axis_first, pad_and_mask, worker_share
from tpuestimator.core.input_fn import declarations
from tpuestimator.core.loops import make_eval_loop, make_predict_step
from tpuestimator.errors import ConfigError


class Evaluator:
    """Owns the evaluation / prediction input and device functions of one Estimator.

    Args:
      strategy: the `tf.distribute.Strategy`.
      state: the built `TrainingState`.
      device_info: the strategy's `devices.DeviceInfo`.
      input_on_host: the input needs no distributing (one replica on the host CPU, or the
        coordinator under parameter servers).

    Each call takes the input function's `params` (`Estimator.input_params(mode)`, whose
    `batch_size` is per replica); nothing here refers back to the Estimator.
    """

    def __init__(self, *, strategy, state, device_info, input_on_host: bool):
        self.strategy = strategy
        self.state = state
        self.device_info = device_info
        self.input_on_host = input_on_host
        self._functions: dict = {}  # (mode, relayout): device functions built once
        self._last_input: tuple | None = None  # (input_fn, params, steps, the input built from them)

    @property
    def num_replicas(self) -> int:
        return int(self.strategy.num_replicas_in_sync)

    @property
    def pads_input(self) -> bool:
        """Evaluation and prediction batches are padded and split between replicas (several
        replicas, a TPU or several workers) rather than read as they come."""
        return (self.num_replicas > 1 or self.device_info.kind == "tpu"
                or self.device_info.strategy_name == "multi_worker")

    def input(self, input_fn, params: dict, steps: int | None, *, whole: bool = False):
        """The evaluation / prediction input, distributed. Several workers (`multi_worker`):
        each pads the whole input alike and keeps its slice of every global batch
        (`batching.worker_share`); the metrics are all-reduced. An input function that declares
        itself `reusable` (`InputFn`) is called once for a run of calls with the same params:
        the input built from it is iterated again; `whole` (each iteration reads it to its end:
        an evaluation without `steps`) keeps one that `fits_in_memory` in memory."""
        declared = declarations(input_fn)
        if not declared.reusable:
            return self._build_input(input_fn, params, steps)
        in_memory = whole and steps is None and declared.fits_in_memory
        key = {k: v for k, v in params.items() if k != "start_step"}
        last = self._last_input
        if (last is not None and last[0] is input_fn and last[2] == (steps, in_memory)
                and _same_params(last[1], key)):
            return last[3]
        built = self._build_input(input_fn, params, steps, in_memory=in_memory)
        self._last_input = (input_fn, key, (steps, in_memory), built)
        return built

    def _build_input(self, input_fn, params: dict, steps: int | None, *, in_memory: bool = False):
        per_replica = params["batch_size"]
        batch_axes = self.client_layout_axes(input_fn)

        def read():  # padding and the split act on axis 0: a transposed batch comes back to it first
            ds = input_fn(dict(params))
            ds = batch_axis_first(ds, batch_axes) if batch_axes else ds
            # only for inputs read to their end: tf.data drops a partly read cache, with a warning
            return ds.cache() if in_memory else ds

        if self.device_info.strategy_name == "multi_worker":
            def worker_input(ctx):  # every worker pads the whole input alike, then keeps its share
                ds = pad_and_mask(read(), per_replica=per_replica, replicas=self.num_replicas, steps=steps)
                return worker_share(ds, worker=ctx.input_pipeline_id, workers=ctx.num_input_pipelines,
                                    per_replica=per_replica)
            return self.strategy.distribute_datasets_from_function(worker_input)
        ds = read()
        if self.num_replicas > 1 or self.device_info.kind == "tpu":
            ds = pad_and_mask(ds, per_replica=per_replica, replicas=self.num_replicas, steps=steps)
        elif steps is not None:
            ds = ds.take(steps)
        if self.input_on_host:
            return ds  # one replica on the host CPU: nothing to distribute (see `Trainer.use_input`)
        return self.strategy.experimental_distribute_dataset(ds)

    def client_layout_axes(self, input_fn) -> dict:
        """{feature: its batch axis} when `input_fn` puts some batch off axis 0 (`InputFn.batch_axes`,
        `data.transpose_input`) and the eval input is padded and split: those batches are moved
        back to axis 0 on the host and the replica step applies `state.to_model_layout`.
        Empty otherwise (one replica reads the model's layout as it comes)."""
        axes = {k: int(v) for k, v in declarations(input_fn).batch_axes.items() if int(v)}
        if not axes or not self.pads_input:
            return {}
        if self.state.to_model_layout is None:
            raise ConfigError("input_fn.batch_axes", axes, "an input function that also declares `to_model_layout` "
                              "(the model was built from one without it): build the Estimator anew")
        return axes

    def function(self, mode: str, input_fn):
        """The eval loop or predict step for `input_fn`'s layout, built once per layout."""
        relayout = self.state.to_model_layout if self.client_layout_axes(input_fn) else None
        key = (mode, relayout is not None)
        if key not in self._functions:
            if mode == "eval":
                carry = self.num_replicas == 1
                self._functions[key] = make_eval_loop(
                    self.strategy, replica_steps.make_eval_step(self.state, carry_totals=carry,
                                                                to_model_layout=relayout),
                    carry_totals=carry)
            else:
                self._functions[key] = make_predict_step(
                    self.strategy, replica_steps.make_predict_replica_step(self.state, to_model_layout=relayout),
                    mask_key=MASK_KEY, every_worker=self.device_info.strategy_name == "multi_worker")
        return self._functions[key]

    def evaluate(self, input_fn, params: dict, steps: int | None = None) -> dict:
        """Runs the eval loop over the input; {metric: value, num_examples, global_step}."""
        state = self.state
        eval_loop = self.function("eval", input_fn)
        for metric in state.eval_metric_objects():
            metric.reset_state()
        loss, count = eval_loop(self.input(input_fn, params, steps, whole=True))
        if self.num_replicas > 1:  # several replicas: the metrics hold the totals
            loss, count = state.eval_loss.result(), state.eval_count.result()
        results = {"loss": float(loss)}
        for name, (metric, _) in state.eval_metrics.items():
            value = metric.result()
            results[name] = float(value) if getattr(value, "shape", ()) == () else value.numpy().tolist()
        results["num_examples"] = int(count)
        results["global_step"] = state.step
        return results

    def predict_batches(self, input_fn, params: dict) -> Iterator[dict]:
        """Each batch's predictions as numpy arrays, padding removed, in input order."""
        step = self.function("predict", input_fn)
        for batch in self.input(input_fn, params, None):
            yield {k: v.numpy() for k, v in step(batch).items()}


def _same_params(a: dict, b: dict) -> bool:
    """`a == b`, False where a value cannot say (an array's `==` is elementwise)."""
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False
