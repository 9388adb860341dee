"""The per-step work the table benchmark (issue 21.8) cut, and that it was cut without changing
any result: the numeric columns normalized as one block, the training stream declared endless
(no optional and `cond` per step in the train loop), and records decoded a window at a time
(training, evaluation and prediction get the batches of decoding each batch). Real TensorFlow
on tiny data."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

FIX = Path(__file__).resolve().parents[1] / "fixtures"
MNIST = {"format": "mnist", "train": str(FIX / "mnist_good.tfrecord"), "eval": str(FIX / "mnist_good.tfrecord"),
         "image": {"height": 8, "width": 8, "channels": 1}}


def test_numeric_columns_normalized_as_one_block_match_each_columns_layer():
    import keras

    from tpuestimator.models.table_preprocessing import TablePreprocessor

    columns = {"a": {"type": "numeric", "dtype": "float32", "mean": 3.25, "variance": 0.01},
               "kind": {"type": "categorical", "dtype": "string", "vocabulary": ["x", "y"], "encoding": "one_hot"},
               "b": {"type": "numeric", "dtype": "float32", "mean": -1200.0, "variance": 4.0e5},
               "raw": {"type": "numeric", "dtype": "float32", "mean": 7.0, "variance": 2.0, "normalize": False},
               "c": {"type": "numeric", "dtype": "float32", "mean": 0.1, "variance": 1.0e-9}}
    rng = np.random.default_rng(0)
    raw = {name: tf.constant(rng.normal(scale=10.0 ** rng.integers(-3, 4), size=50).astype(np.float32))
           for name in ("a", "b", "raw", "c")}
    raw["kind"] = tf.constant(rng.choice(["x", "y", "z"], size=50))
    out = TablePreprocessor(columns)(raw)
    assert list(out) == ["a", "kind", "b", "raw", "c"]  # the columns' order
    for name in ("a", "b", "c"):
        layer = keras.layers.Normalization(axis=None, mean=columns[name]["mean"], variance=columns[name]["variance"])
        np.testing.assert_array_equal(out[name].numpy(), layer(raw[name]).numpy())  # bitwise
    np.testing.assert_array_equal(out["raw"].numpy(), raw["raw"].numpy())
    assert out["kind"].numpy().tolist() == [{"x": 1, "y": 2}.get(v.decode(), 0) for v in raw["kind"].numpy()]  # OOV: 0


def test_the_training_stream_is_endless_so_the_train_loop_reads_without_a_cond():
    """An input that may end is read through an optional and a `cond` every step (core.loops);
    the built-in training stream never ends and says so."""
    from tpuestimator.data import make_input_fn

    for extra in ({}, {"cache_decoded": True}):
        ds = make_input_fn({**MNIST, **extra}, "train")({"batch_size": 4, "seed": 0})
        assert int(ds.cardinality()) == int(tf.data.INFINITE_CARDINALITY)
    assert int(make_input_fn(MNIST, "eval")({"batch_size": 4}).cardinality()) != int(tf.data.INFINITE_CARDINALITY)


def _batches_decoded_one_by_one(section: dict, batch_size: int, skip_batches: int, n: int) -> list:
    """The training stream as the pipeline defines it (data.epochs: each epoch's files in its
    order, read a chunk per file in turn, permuted windows, cut into batches), each batch of
    serialized records parsed and preprocessed on its own: the pipeline before it decoded
    whole windows."""
    from tpuestimator.data import epochs, pipeline, resolve_section

    spec = resolve_section(section)
    files = pipeline.list_files(spec.train)

    def read_epoch(epoch):
        return epochs.epoch_files(files, 0, epoch).interleave(
            lambda f: tf.data.TFRecordDataset(f).batch(pipeline._CHUNK), cycle_length=min(8, len(files)),
            block_length=1)

    records = epochs.shuffled_batches(read_epoch, window=epochs.window_size(spec.shuffle_buffer, batch_size),
                                      batch_size=batch_size, seed=0, skip_batches=skip_batches)
    decoder = pipeline.make_batch_decoder(spec, "train")
    return list(records.map(decoder).take(n).as_numpy_iterator())


def _assert_same_batches(got: list, want: list) -> None:
    """The same `(features, labels)` batches, bitwise."""
    for (features, labels), (want_features, want_labels) in zip(got, want):
        np.testing.assert_array_equal(labels, want_labels)
        assert sorted(features) == sorted(want_features)
        for name in features:
            np.testing.assert_array_equal(features[name], want_features[name])


@pytest.mark.parametrize("kind", ["table", "mnist", "mnist_in_parts"])
def test_decoding_a_window_at_a_time_gives_the_batches_decoding_each_batch_gave(tmp_path, kind, monkeypatch):
    """The pipeline parses (and preprocesses) a whole shuffle window at a time, then cuts it
    into batches: the same records, bitwise the same values, in the same batches, from the
    start and resumed mid-window, across epoch ends (a batch of 7 never divides the epoch; a
    window of 21 records leaves a partial one at each epoch's end). A window too large to
    decode at once is decoded in parts (here 14 records: two batches) with the same result."""
    from tpuestimator.data import make_input_fn, pipeline
    from tpuestimator.tables import write_table

    if kind == "mnist_in_parts":
        monkeypatch.setattr(pipeline, "_DECODE_BYTES", 14 * (8 * 8 * 4 + 4))  # 14 decoded images and labels
        element = ({"image": tf.TensorSpec([None, 8, 8, 1], tf.float32)}, tf.TensorSpec([None], tf.int32))
        assert pipeline.decode_part(element, 21, 7) == 14

    if kind == "table":
        frame = pd.read_csv(FIX / "tables" / "species.csv")
        assert not pd.api.types.is_numeric_dtype(frame["habitat"])  # a string lookup among the columns
        write_table(frame, tmp_path / "t", label="species", shards=2)
        section = {"manifest": str(tmp_path / "t" / "manifest.json"), "shuffle_buffer": 20}
        assert len(tf.io.gfile.glob(str(tmp_path / "t" / "train-*"))) == 2
    else:
        section = {**MNIST, "shuffle_buffer": 20}
    read = make_input_fn(section, "train")
    for skip in (0, 9, 40):
        got = list(read({"batch_size": 7, "seed": 0, "start_step": skip}).take(25).as_numpy_iterator())
        want = _batches_decoded_one_by_one(section, 7, skip, 25)
        assert len(got) == len(want) == 25
        _assert_same_batches(got, want)


@pytest.mark.parametrize("kind", ["table", "mnist", "mnist_in_parts"])
def test_evaluation_decoded_a_window_at_a_time_gives_the_batches_decoding_each_batch_gave(tmp_path, kind,
                                                                                         monkeypatch):
    """Evaluation and prediction read the files once in order; decoded `shuffle_buffer` records
    at a time (or in parts), then cut: the same batches as before, the last one partial."""
    from tpuestimator.data import make_input_fn, pipeline, resolve_section
    from tpuestimator.tables import write_table

    if kind == "table":
        frame = pd.read_csv(FIX / "tables" / "species.csv")
        write_table(frame, tmp_path / "t", label="species", shards=2, split=0.5)
        section = {"manifest": str(tmp_path / "t" / "manifest.json"), "shuffle_buffer": 20}
    else:
        section = {**MNIST, "shuffle_buffer": 20}
    if kind == "mnist_in_parts":
        monkeypatch.setattr(pipeline, "_DECODE_BYTES", 14 * (8 * 8 * 4 + 4))
    for mode in ("eval", "predict"):
        spec = resolve_section(section)
        files = pipeline.list_files(spec.eval)
        records = tf.data.Dataset.from_tensor_slices(files).interleave(
            lambda f: tf.data.TFRecordDataset(f).batch(pipeline._CHUNK), cycle_length=min(8, len(files)),
            block_length=1).rebatch(7)
        want = list(records.map(pipeline.make_batch_decoder(spec, mode)).as_numpy_iterator())
        got = list(make_input_fn(section, mode)({"batch_size": 7}).as_numpy_iterator())
        assert len(got) == len(want) and len(want[-1][1]) < 7  # a partial last batch
        _assert_same_batches(got, want)


def _sign_converted(x):
    if x > 0:  # a Python `if` on a tensor: legal in a graph only once AutoGraph converts it
        return x
    return -x


def _sign_as_written(x):
    if x > 0:
        return x
    return -x


def test_the_librarys_graph_helpers_are_called_as_written_not_converted_by_autograph():
    """`system.graph_code.as_written`: inside a tf.function AutoGraph calls a marked function as written
    (no conversion, whose parse-and-rewrite each new process paid on its first trace). Seen
    through a tensor `if`, which only conversion makes legal: the unmarked twin converts and runs,
    the marked one raises. The library's own helpers in every train and eval step carry the mark."""
    from tpuestimator.core.loops import all_finite
    from tpuestimator.core.steps import add_to_metric
    from tpuestimator.spec import model_inputs, split_element
    from tpuestimator.system.graph_code import as_written

    marked = as_written(_sign_as_written)
    assert tf.function(lambda x: _sign_converted(x))(tf.constant(-2.0)).numpy() == 2.0
    with pytest.raises(TypeError, match="tf.Tensor. as a Python .bool."):
        tf.function(lambda x: marked(x))(tf.constant(-2.0))
    for helper in (split_element, model_inputs, add_to_metric, all_finite):
        assert getattr(helper, "autograph_info__", None) is not None, helper.__name__
    # called as written, they still build the same values
    features, labels = tf.function(lambda e: split_element(e))(({"a": tf.constant([1.0])}, tf.constant([2])))
    assert features["a"].numpy().tolist() == [1.0] and labels.numpy().tolist() == [2]
    assert tf.function(lambda v: all_finite(v))([tf.Variable([1.0, float("inf")])]).numpy() == np.False_
