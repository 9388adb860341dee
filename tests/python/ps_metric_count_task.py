"""Every task of a local parameter-server cluster (test_cluster_ps.py): the ps and worker
tasks serve (`cluster.tasks.serve`, what `tpuestimator train` does there); the chief trains
`linear` (with Adam on a learning-rate schedule) for STEPS steps of BATCH examples and, after
each device loop and before the loop's metrics are read and reset, reads how many examples the
training-loss metric counted (its `count` variable, on the ps); at the end, the global step, the
optimizer's step count and the learning rate its schedule gives there. Prints one line
`RESULT {json}`.

Usage: ps_metric_count_task.py STEPS BATCH STEPS_PER_INVOCATION ITERATIONS_PER_LOOP
"""
import dataclasses
import json
import sys
import tempfile

from helpers import array_input_fn, make_data
from tpuestimator.cluster.tasks import serve
from tpuestimator.core.cluster_task import tf_config_task
from tpuestimator.core.estimator import Estimator, RunConfig
from tpuestimator.core.hooks import Hook
from tpuestimator.models.tabular import linear

steps, batch, per_invocation, per_loop = (int(a) for a in sys.argv[1:5])

if tf_config_task()["type"] != "chief":
    serve(poll_seconds=0.2)
    sys.exit(0)


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
print("RESULT " + json.dumps({"global_step": estimator.state.step, "loss_counts": hook.counts,
                              "optimizer_iterations": int(estimator.state.optimizer.iterations.numpy()),
                              "learning_rate": float(estimator.state.optimizer.learning_rate.numpy()),
                              "schedule_at_global_step": float(decay_schedule()(estimator.state.step).numpy()),
                              "steps_by_worker": {str(k): v for k, v in estimator.trainer.steps_by_worker.items()}}),
      flush=True)
