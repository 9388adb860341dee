"""A parameter-server cluster in ONE process (test_cluster_ps.py): servers for 2 ps tasks and a
worker (TensorFlow's in-process cluster, as its own PS tests do; one TensorFlow start instead
of four), this process the chief. Shards a variable with `run.ps_partition`, trains a model whose
embedding table (`sharded_embedding`, vocabulary 2000 x 16) is sharded over the 2 ps tasks, and
tries to build a model whose Dense kernel would be sharded. Prints one line `RESULT {json}`."""
import json
import os
import tempfile

import numpy as np
import tensorflow as tf

from helpers import array_input_fn, make_data
from tpuestimator.cluster.local_cluster import free_ports
from tpuestimator.core.devices import make_strategy
from tpuestimator.core.estimator import Estimator, RunConfig
from tpuestimator.errors import ConfigError
from tpuestimator.models.embedding import sharded_embedding
from tpuestimator.spec import ModelSpec

ports = iter(free_ports(4))
cluster = {"chief": [f"127.0.0.1:{next(ports)}"], "worker": [f"127.0.0.1:{next(ports)}"],
           "ps": [f"127.0.0.1:{next(ports)}", f"127.0.0.1:{next(ports)}"]}
servers = [tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=kind, task_index=i, protocol="grpc", start=True)
           for kind in ("ps", "worker") for i in range(len(cluster[kind]))]
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})

partition = {"min_shard_bytes": 1024}
strategy, info = make_strategy(RunConfig(model_dir=tempfile.mkdtemp(), strategy="parameter_server",
                                          ps_partition=partition))
with strategy.scope():
    big = tf.Variable(tf.zeros([1000, 64]), name="embedding")  # 256 000 bytes: over 2 ps, 2 shards
    small = tf.Variable(tf.zeros([4]), name="bias")  # 16 bytes: one piece
out = {"strategy": info.strategy_name, "big_type": type(big).__name__,
       "big_devices": [v.device for v in getattr(big, "variables", [big])],
       "big_shapes": [v.shape.as_list() for v in getattr(big, "variables", [big])],
       "small_type": type(small).__name__}
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
