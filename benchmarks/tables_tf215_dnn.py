"""The TF 2.15 baseline of bench_tables_speed.py: `tf.estimator.DNNClassifier` with feature columns.

Runs under a TensorFlow 2.15 interpreter (a scratch venv outside the repository, e.g.
`python3.11 -m venv /tmp/tf215venv && /tmp/tf215venv/bin/pip install 'tensorflow-cpu==2.15.*'`),
never under the project's venv: `tf.estimator` is gone from TensorFlow 2.16+. Imports nothing
from tpuestimator.

    /tmp/tf215venv/bin/python benchmarks/tables_tf215_dnn.py SPEC.json

SPEC.json (written by bench_tables_speed.py) names the TFRecord files, the label, the numeric
features with their training-split mean and standard deviation, the categorical features with
their vocabulary and how they are fed (one-hot: `indicator_column`; embedding:
`embedding_column`), the hidden units, learning rate and batch size: the same model and the
same records as the tpuestimator and Keras sides.

Gated protocol (stdin/stdout, one line each): before every `loop_steps`-th training step the
script prints `BOUNDARY <process cpu seconds>` and waits for a line `GO` (run the next loop)
or `STOP` (exit). The parent times the loops between its `GO`s, taking turns with the other
configurations (benchmarks/common.py run_gated), so every configuration is measured under the
same load. Everything else the script prints goes to stderr.
"""
from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def feature_columns(spec):
    import tensorflow as tf

    fc = tf.feature_column
    columns = []
    for name, (mean, std) in sorted(spec["numeric"].items()):
        columns.append(fc.numeric_column(
            name, normalizer_fn=lambda x, m=float(mean), s=float(std) or 1.0: (x - m) / s))
    for name, cat in sorted(spec["categorical"].items()):
        col = fc.categorical_column_with_vocabulary_list(name, cat["vocabulary"], num_oov_buckets=1)
        if cat.get("embedding_dim"):
            columns.append(fc.embedding_column(col, dimension=int(cat["embedding_dim"])))
        else:
            columns.append(fc.indicator_column(col))
    return columns


def input_fn(spec):
    """TFRecords -> shuffle -> repeat -> batch -> one parse_example per batch -> prefetch: the
    pipeline a tf.estimator user wrote (tf.data, vectorised parsing), same records as the others."""
    import tensorflow as tf

    parse = {name: tf.io.FixedLenFeature([1], tf.float32) for name in spec["numeric"]}
    parse.update({name: tf.io.FixedLenFeature([1], tf.string) for name in spec["categorical"]})
    parse[spec["label"]] = tf.io.FixedLenFeature([1], tf.int64)
    label = spec["label"]

    def fn():
        files = sorted(tf.io.gfile.glob(spec["train_files"]))
        ds = tf.data.TFRecordDataset(files)
        if spec.get("cache", True):
            ds = ds.cache()
        ds = ds.shuffle(spec.get("shuffle_buffer", 1024), seed=0).repeat()
        ds = ds.batch(spec["batch_size"], drop_remainder=True)

        def split(serialized):
            feats = tf.io.parse_example(serialized, parse)
            return feats, feats.pop(label)
        return ds.map(split, num_parallel_calls=2).prefetch(2)
    return fn


class GateHook:
    """Prints BOUNDARY before every `loop_steps`-th step and waits for GO / STOP on stdin."""

    def __new__(cls, loop_steps, out):
        import tensorflow as tf

        class _Hook(tf.estimator.SessionRunHook):
            def __init__(self):
                self.calls = 0

            def before_run(self, run_context):
                if self.calls % loop_steps == 0:
                    out.write(f"BOUNDARY {time.process_time():.6f}\n")
                    out.flush()
                    line = sys.stdin.readline().strip()
                    if line != "GO":
                        out.flush()
                        os._exit(0)  # STOP (or the parent went away): nothing to save
                self.calls += 1
                return None
        return _Hook()


def main(argv):
    spec = json.loads(open(argv[1]).read())
    # The protocol owns stdout; TensorFlow's and absl's chatter goes to stderr.
    out = sys.stdout
    sys.stdout = sys.stderr
    import tensorflow as tf

    tf.random.set_seed(spec.get("seed", 0))
    config = tf.estimator.RunConfig(model_dir=spec["model_dir"], tf_random_seed=spec.get("seed", 0),
                                    save_checkpoints_steps=None, save_checkpoints_secs=10**6,
                                    log_step_count_steps=spec.get("log_step_count_steps", 100))
    est = tf.estimator.DNNClassifier(
        hidden_units=spec["hidden_units"], feature_columns=feature_columns(spec), n_classes=spec["n_classes"],
        optimizer=lambda: tf.keras.optimizers.legacy.Adam(learning_rate=spec["learning_rate"]),
        dropout=spec.get("dropout") or None, config=config)
    est.train(input_fn(spec), steps=10**9, hooks=[GateHook(spec["loop_steps"], out)])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
