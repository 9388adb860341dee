"""The training path a reader follows: from `Estimator.train` to the replica step in six calls
over five files (docs/ARCHITECTURE.md "Training, step by step"), read off the stack while the
replica step is traced."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

from helpers import array_input_fn, make_data

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "tpuestimator"


def _project_path(frames) -> list[tuple[str, str]]:
    """(file, function) of the frames in the package, outermost first; AutoGraph's converted
    copy of a function (`tf__name` in a generated file) counts as that function, the bodies it
    generates for `for`/`if` (`loop_body_1`, ...) as nothing, and so a `tf.while_loop`'s body
    written as a lambda."""
    path = []
    for frame in reversed(frames):
        if frame.function == "<lambda>":
            continue
        if frame.filename.startswith(str(PACKAGE)):
            path.append((str(Path(frame.filename).relative_to(PACKAGE)), frame.function))
        elif "__autograph_generated" in frame.filename and frame.function.startswith("tf__"):
            path.append(("(autograph)", re.sub(r"^tf__", "", frame.function)))
    return path


def test_the_replica_step_is_six_calls_from_estimator_train(tmp_path):
    from tpuestimator import Estimator, ModelSpec, RunConfig
    from tpuestimator.core import loops, steps
    from tpuestimator.core.controller import TrainController
    from tpuestimator.core.trainer import Trainer

    seen = []

    def model_fn(params):
        import keras

        inputs = keras.Input((20,), name="x")
        model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
        cross_entropy = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

        def loss(labels, logits):
            seen.append(_project_path(inspect.stack(context=0)))  # at trace time: the Python calls
            return cross_entropy(labels, logits)
        return ModelSpec(model=model, loss=loss, optimizer=keras.optimizers.SGD(0.1))

    x, y = make_data(64)
    est = Estimator(model_fn, RunConfig(model_dir=str(tmp_path / "m"), train_batch_size=16, iterations_per_loop=2,
                                        strategy="cpu"))
    est.train(array_input_fn(x, y), max_steps=2)
    assert est.global_step == 2
    path = seen[0]
    start = path.index(("core/estimator.py", "train"))
    names = [name for _, name in path[start:]]
    assert names[:names.index("replica_step") + 1] == ["train", "train_to", "run_loop", "loop", "run_step",
                                                       "replica_step"]
    where = {name: inspect.getsourcefile(fn) for name, fn in (
        ("train", Estimator.train), ("train_to", TrainController.train_to), ("run_loop", Trainer.run_loop),
        ("loop", loops.make_train_loop), ("run_step", loops.make_train_loop), ("replica_step", steps.make_train_step))}
    assert {Path(where[name]).relative_to(PACKAGE).as_posix() for name in names[:6]} == {
        "core/estimator.py", "core/controller.py", "core/trainer.py", "core/loops.py", "core/steps.py"}
