"""A parameter-server cluster in ONE process (test_cluster_ps.py): servers for 2 worker and 2 ps
tasks (TensorFlow's in-process cluster, as its own PS tests do; one TensorFlow start instead of
five), this process the chief. The ps/worker role of `tpuestimator train` in processes of its
own is the user's `tpuestimator cluster` test; this one checks, on one cluster:

- `metric_count`: the chief trains `linear` (with Adam on a learning-rate schedule) for STEPS
  steps of BATCH examples, both workers running scheduled functions at once (each worker's
  server runs them on its own threads, so the two workers' updates of the same ps variables
  interleave as between processes) and, after each device loop and before the loop's metrics
  are read and reset, reads how many examples the training-loss metric counted (its `count`
  variable, on a ps); at the end, the global step, the optimizer's step count and the
  learning rate its schedule gives there.
- the sharding: shards a variable with `run.ps_partition`, trains a model whose embedding table
  (`sharded_embedding`, vocabulary 2000 x 16) is sharded over the 2 ps tasks, and tries to
  build models whose Dense kernel or non-trainable weight would be sharded.

Prints one line `RESULT {json}`.

Usage: ps_in_process_cluster.py STEPS BATCH STEPS_PER_INVOCATION ITERATIONS_PER_LOOP
"""
import dataclasses
import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

from helpers import array_input_fn, make_data
from tpuestimator.cluster.layout import free_ports
from tpuestimator.core.devices import make_strategy
from tpuestimator.core.estimator import Estimator, RunConfig
from tpuestimator.core.hooks import Hook
from tpuestimator.errors import ConfigError
from tpuestimator.models.embedding import sharded_embedding
from tpuestimator.models.tabular import linear
from tpuestimator.spec import ModelSpec

steps, batch, per_invocation, per_loop = (int(a) for a in sys.argv[1:5])

ports = iter(free_ports(5))
cluster = {"chief": [f"127.0.0.1:{next(ports)}"], "worker": [f"127.0.0.1:{next(ports)}", f"127.0.0.1:{next(ports)}"],
           "ps": [f"127.0.0.1:{next(ports)}", f"127.0.0.1:{next(ports)}"]}
# as TensorFlow's own in-process clusters (multi_worker_test_base): with fewer inter-op threads
# than workers + 1, the two workers' scheduled functions wait on each other for ever
threads = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=len(cluster["worker"]) + 1)
servers = [tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=kind, task_index=i, protocol="grpc",
                                config=threads, start=True)
           for kind in ("ps", "worker") for i in range(len(cluster[kind]))]
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})
out = {}

# ---------------------------------------------------------------- no lost example, no lost step


class CountLossExamples(Hook):
    """Wraps the train loop: after each loop, the loss metric's example count (the trainer then
    reads the metric and resets it)."""

    def __init__(self):
        self.counts = []
        self.wrapped = False

    def before_loop(self, step):
        if self.wrapped:
            return
        trainer = self.estimator.trainer
        inner, metric = trainer.train_input.loop, self.estimator.state.train_metrics["loss"]

        def counting_loop(iterator, n):
            ran = inner(iterator, n)
            self.counts.append(float(metric.count.numpy()))
            return ran

        trainer.swap_loop(counting_loop)
        self.wrapped = True


def decay_schedule():
    """A rate that differs at every step (0.01 at step 0, down to 0 at step 10 000)."""
    import keras

    return keras.optimizers.schedules.PolynomialDecay(0.01, decay_steps=10_000, end_learning_rate=0.0)


def linear_on_a_schedule(params):
    import keras

    return dataclasses.replace(linear(params), optimizer=keras.optimizers.Adam(decay_schedule()))


x, y = make_data(4096, dim=8)
config = RunConfig(model_dir=tempfile.mkdtemp(), strategy="parameter_server", train_batch_size=batch,
                   iterations_per_loop=per_loop, save_checkpoints_steps=None, ps_steps_per_invocation=per_invocation)
estimator = Estimator(linear_on_a_schedule, config, {"num_classes": 3})
hook = CountLossExamples()
estimator.train(array_input_fn(x, y), max_steps=steps, hooks=[hook], save_final_checkpoint=False)
out["metric_count"] = {
    "global_step": estimator.state.step, "loss_counts": hook.counts,
    "optimizer_iterations": int(estimator.state.optimizer.iterations.numpy()),
    "learning_rate": float(estimator.state.optimizer.learning_rate.numpy()),
    "schedule_at_global_step": float(decay_schedule()(estimator.state.step).numpy()),
    "steps_by_worker": {str(k): v for k, v in estimator.trainer.steps_by_worker.items()}}

# ---------------------------------------------------------------- ps_partition

partition = {"min_shard_bytes": 1024}
strategy, info = make_strategy(RunConfig(model_dir=tempfile.mkdtemp(), strategy="parameter_server",
                                          ps_partition=partition))
with strategy.scope():
    big = tf.Variable(tf.zeros([1000, 64]), name="embedding")  # 256 000 bytes: over 2 ps, 2 shards
    small = tf.Variable(tf.zeros([4]), name="bias")  # 16 bytes: one piece
out.update({"strategy": info.strategy_name, "big_type": type(big).__name__,
            "big_devices": [v.device for v in getattr(big, "variables", [big])],
            "big_shapes": [v.shape.as_list() for v in getattr(big, "variables", [big])],
            "small_type": type(small).__name__})
x, y = make_data(64, dim=300)  # linear model: a 300 x 3 kernel (3600 bytes) would be sharded
config = RunConfig(model_dir=tempfile.mkdtemp(), strategy="parameter_server", ps_partition=partition, train_batch_size=16)
try:
    Estimator("linear", config, {"num_classes": 3}).build(array_input_fn(x, y))
    out["trainable_sharding"] = "accepted"
except ConfigError as exc:
    out["trainable_sharding"] = str(exc)


def counter_model_fn(params):  # a large non-trainable weight: a checkpoint could not save it sharded
    import keras

    class Counts(keras.layers.Layer):
        def build(self, shape):
            self.counts = self.add_weight(shape=(4096,), initializer="zeros", trainable=False, name="counts")

        def call(self, x):
            return x

    x_in = keras.Input(shape=(300,), name="x")
    return ModelSpec(model=keras.Model(x_in, keras.layers.Dense(3, name="logits")(Counts(name="counter")(x_in))),
                     optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


try:
    Estimator(counter_model_fn, config, {}).build(array_input_fn(x, y))
    out["non_trainable_sharding"] = "accepted"
except ConfigError as exc:
    out["non_trainable_sharding"] = str(exc)

# A trainable embedding of 2000 x 16 floats (128 000 bytes): the layer owns 2 row shards.
VOCAB, DIM = 2000, 16


def embedding_model_fn(params):
    import keras

    ids = keras.Input(shape=(), dtype="int32", name="ids")
    logits = keras.layers.Dense(2, name="logits")(sharded_embedding(VOCAB, DIM, name="emb")(ids))
    return ModelSpec(model=keras.Model(ids, logits), optimizer=keras.optimizers.Adam(0.05),
                     loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None))


ids = np.random.RandomState(0).randint(0, VOCAB, size=512).astype("int32")
labels = (ids % 2).astype("int32")  # only the embedding can tell odd ids from even ones


def ids_input_fn(params):
    ds = tf.data.Dataset.from_tensor_slices(({"ids": ids}, labels))
    if params["mode"] == "train":
        ds = ds.repeat()
    return ds.batch(params["batch_size"], drop_remainder=params["mode"] == "train")


model_dir = tempfile.mkdtemp()
embedding_config = RunConfig(model_dir=model_dir, strategy="parameter_server", ps_partition=partition,
                             train_batch_size=32, iterations_per_loop=20, save_checkpoints_steps=20)
est = Estimator(embedding_model_fn, embedding_config, {})
est.build(ids_input_fn)
layer = est.state.model.get_layer("emb")
out["embedding_shards"] = [[w.value.device, w.shape[0], w.shape[1]] for w in layer.shards]
out["embedding_loss_before"] = float(est.evaluate(ids_input_fn, steps=8)["loss"])
est.train(ids_input_fn, max_steps=60)
out["embedding_loss_after"] = float(est.evaluate(ids_input_fn, steps=8)["loss"])
out["embedding_checkpoint"] = os.path.basename(est.state.latest_checkpoint() or "")
# the optimizer's slots of each shard live with the shard
out["slot_devices"] = sorted({v.value.device for v in est.state.optimizer.variables if "emb" in v.path})

print("RESULT " + json.dumps(out), flush=True)
os._exit(0)  # the in-process servers cannot be stopped
