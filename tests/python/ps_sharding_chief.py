"""A parameter-server cluster in ONE process (test_cluster_ps.py): servers for 2 ps tasks and a
worker (TensorFlow's in-process cluster, as its own PS tests do; one TensorFlow start instead
of four), this process the chief. Shards a variable with `run.ps_partition` and tries to build
a model whose trainable weight would be sharded. Prints one line `RESULT {json}`."""
import json
import os
import tempfile

import tensorflow as tf

from cluster_helpers import cluster_spec
from helpers import array_input_fn, make_data
from tpuestimator.devices import make_strategy
from tpuestimator.errors import ConfigError
from tpuestimator.estimator import Estimator, RunConfig

cluster = cluster_spec(workers=1, ps=2)
servers = [tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=kind, task_index=i, protocol="grpc", start=True)
           for kind in ("ps", "worker") for i in range(len(cluster[kind]))]
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "chief", "index": 0}})

partition = {"min_shard_bytes": 1024}
strategy, info = make_strategy({"strategy": "parameter_server", "ps_partition": partition})
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
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)  # the in-process servers cannot be stopped
