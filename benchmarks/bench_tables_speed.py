"""Training speed of the canned `dnn` classifier on a mixed table, against TF 2.15's
`tf.estimator.DNNClassifier` with feature columns and against Keras 3 `model.fit` on the same
FeatureSpace model (issue 21, point 8).

Workload: `tables_common.make_mixed_table` (20 features: 12 numeric, 8 string categoricals of 3
to 1,000 values; binary label), written as TFRecords; batch 128, hidden units [128, 64], Adam
1e-3, 100 steps per loop (iterations_per_loop = steps_per_execution; TF 2.15 runs one
`session.run` per step, as it always did). The three configurations build the same network
from the same feature definitions: numeric features normalised with the training split's
mean and variance, small categoricals one-hot, large ones embedded, one out-of-vocabulary
bucket each.

- `tpuestimator`: the Estimator training the canned model on the table's records through the
  table input pipeline (string lookups on the host), with `tpuestimator train`'s hooks
  (LoggingHook, SummaryHook) and the NaN sentinel;
- `keras`: Keras 3 `model.fit(steps_per_execution=100)` on the FeatureSpace model, the
  FeatureSpace applied in the tf.data pipeline as Keras documents it (same process);
- `tf215`: `benchmarks/tables_tf215_dnn.py` run by a TensorFlow 2.15 interpreter in a child
  process (`--tf215-python`, default /tmp/tf215venv/bin/python), its default hooks (step
  counter, summaries every 100 steps), stopped at every 100th step by the same turnstile.

All three take turns (common.run_gated): per round each gets 1 settle + 3 timed 100-step loops,
in an order that rotates; ratios are per round (same load on both sides).

    nice -n 10 .venv/bin/python benchmarks/bench_tables_speed.py [--smoke] [--rounds N]
        [--configs tpuestimator,keras,tf215] [--tf215-python PATH]

Writes `<out>/tables_speed.json`. Targets: tpuestimator/tf215 >= 2.0, tpuestimator/keras >= 1.0.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import tables_common as tc  # noqa: E402

common.setup_path()

import tables_ours  # noqa: E402

TARGETS = {"tpuestimator/tf215": 2.0, "tpuestimator/keras": 1.0}
HIDDEN = [128, 64]
LEARNING_RATE = 1e-3
TF215_SCRIPT = Path(__file__).resolve().parent / "tables_tf215_dnn.py"
DEFAULT_TF215 = "/tmp/tf215venv/bin/python"


class KerasFit:
    """Keras 3 `fit(steps_per_execution=100)` on the FeatureSpace model."""

    def __init__(self, fs, embedding_dims: dict, pattern: str, batch: int, steps_per_loop: int):
        import keras
        import tensorflow as tf

        keras.utils.set_random_seed(0)
        model = tc.keras_dnn(fs, embedding_dims, HIDDEN)
        model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=steps_per_loop)
        self.model = model
        self.params = model.count_params()
        self.dataset = (tc.bare_dataset(pattern, batch, cache=True)
                        .map(lambda x, y: (fs(x), y), num_parallel_calls=2).prefetch(2))
        del tf

    def __call__(self, gate: common.Gate) -> None:
        common.fit_gated(self.model, self.dataset, gate)


class OursTrain:
    """The Estimator with the canned `dnn` as `tpuestimator train` runs it."""

    def __init__(self, table_dir: str, batch: int, steps_per_loop: int):
        from tpuestimator.hooks.builtin import LoggingHook, SummaryHook

        self.model_dir = common.temp_dir("tables-est")
        self.estimator, self.input_fn = tables_ours.dnn_estimator(
            table_dir, model_dir=self.model_dir, batch=batch, hidden_units=HIDDEN, learning_rate=LEARNING_RATE,
            steps_per_loop=steps_per_loop)
        self.hooks = [LoggingHook(1), SummaryHook(os.path.join(self.model_dir, "logs"))]

    def __call__(self, gate: common.Gate) -> None:
        common.train_gated(self.estimator, self.input_fn, self.hooks, gate)


class TF215Train:
    """tables_tf215_dnn.py in a TF 2.15 child process, driven through its gate protocol."""

    def __init__(self, python: str, spec: dict, work: str):
        self.spec_path = tc.save_json(os.path.join(work, "tf215_spec.json"), spec)
        self.stderr_path = os.path.join(work, "tf215.stderr")
        self.python = python
        self.child_cpu: list[float] = []
        self.proc = None

    def __call__(self, gate: common.Gate) -> None:
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([self.python, str(TF215_SCRIPT), self.spec_path], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True,
                                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=""))
            try:
                while True:
                    line = self.proc.stdout.readline()
                    if not line.startswith("BOUNDARY"):
                        raise RuntimeError(f"the TF 2.15 child ended (exit {self.proc.poll()}): "
                                           f"{Path(self.stderr_path).read_text()[-3000:]}")
                    self.child_cpu.append(float(line.split()[1]))
                    gate.boundary()
                    self.proc.stdin.write("GO\n")
                    self.proc.stdin.flush()
            finally:
                if self.proc.poll() is None:
                    try:
                        self.proc.stdin.write("STOP\n")
                        self.proc.stdin.flush()
                        self.proc.wait(30)
                    except (OSError, subprocess.TimeoutExpired):
                        self.proc.kill()


def tf215_spec(stats: dict, pattern: str, batch: int, steps_per_loop: int, work: str) -> dict:
    return dict(stats, train_files=pattern, batch_size=batch, loop_steps=steps_per_loop, hidden_units=HIDDEN,
                learning_rate=LEARNING_RATE, n_classes=2, model_dir=os.path.join(work, "tf215_model"), seed=0)


def check_tf215(python: str) -> str | None:
    """The TF 2.15 interpreter's version, or None when it cannot import tf.estimator."""
    if not python or not os.path.exists(python):
        return None
    proc = subprocess.run([python, "-c", "import tensorflow as tf; tf.estimator.DNNClassifier; print(tf.__version__)"],
                          capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=""))
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--rounds", type=int, default=None, help="timed rounds (default 10; smoke 1)")
        p.add_argument("--rows", type=int, default=None, help="training rows (default 20000; smoke 2000)")
        p.add_argument("--batch", type=int, default=128)
        p.add_argument("--configs", default="tpuestimator,keras,tf215")
        p.add_argument("--tf215-python", default=os.environ.get("TPUE_BENCH_TF215_PYTHON", DEFAULT_TF215))

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=None)
    rounds = args.rounds or args.repeats or (1 if args.smoke else 10)
    rows = args.rows or (2000 if args.smoke else 20000)
    steps_per_loop = 10 if args.smoke else common.STEPS_PER_LOOP
    configs = args.configs.split(",")
    notes = []
    warnings.filterwarnings("ignore", category=UserWarning)
    logging.getLogger("tpuestimator").setLevel(logging.WARNING)

    tf215_version = check_tf215(args.tf215_python) if "tf215" in configs else None
    if "tf215" in configs and tf215_version is None:
        configs.remove("tf215")
        notes.append(f"tf215 not run: {args.tf215_python} cannot import tf.estimator (TensorFlow 2.15); "
                     "install it in a scratch venv: python3.11 -m venv /tmp/tf215venv && "
                     "/tmp/tf215venv/bin/pip install 'tensorflow-cpu==2.15.*'")

    machine = common.machine()  # the load average before the run (write_results adds the one after)
    work = common.temp_dir("tables-speed")
    df = tc.make_mixed_table(rows, seed=0)
    table_dir = tables_ours.write_table(df, os.path.join(work, "table"))
    pattern = tables_ours.train_pattern(table_dir)
    stats = tables_ours.baseline_stats(table_dir)

    runners = {}
    if "tpuestimator" in configs:
        runners["tpuestimator"] = OursTrain(table_dir, args.batch, steps_per_loop)
    if "keras" in configs:
        runners["keras"] = KerasFit(tables_ours.feature_space_like(table_dir), tables_ours.embedding_dims(table_dir),
                                    pattern, args.batch, steps_per_loop)
    if "tf215" in configs:
        runners["tf215"] = TF215Train(args.tf215_python, tf215_spec(stats, pattern, args.batch, steps_per_loop, work),
                                      work)
    print(f"tables_speed: {rows} rows, configs {list(runners)}, {rounds} rounds", flush=True)
    turns = common.run_gated(runners, rounds=rounds, warmup=1, turn=(1, 3),
                             log=lambda m: print(m, flush=True))

    per_config = {name: common.loop_stats(t, steps_per_loop) for name, t in turns.items()}
    ratios, details = {}, {}
    for other in ("tf215", "keras"):
        if "tpuestimator" in turns and other in turns:
            key = f"tpuestimator/{other}"
            r = common.loop_ratio(turns["tpuestimator"], turns[other])
            ratios[key] = common.check_target(r["steps_per_sec"], TARGETS[key])
            details[key] = r  # with the overall ratio and the CPU-work ratio
    if "tf215" in runners:
        cpu = runners["tf215"].child_cpu
        # the child's own CPU per 100 steps, over all its loops (warm-up round included)
        per_config["tf215"]["child_cpu_ms_per_100_steps"] = (
            1000 * (cpu[-1] - cpu[0]) * 100 / ((len(cpu) - 1) * steps_per_loop) if len(cpu) > 1 else None)
    results = {"workload": {"rows": rows, "features": len(tc.NUMERIC) + len(tc.CATEGORICAL),
                            "numeric": len(tc.NUMERIC), "categorical": dict(tc.CATEGORICAL), "batch": args.batch,
                            "hidden_units": HIDDEN, "steps_per_loop": steps_per_loop,
                            "model": tables_ours.describe(), "tf215": tf215_version},
               "configs": per_config, "ratio_details": details}
    path = common.write_results("tables_speed", args.out, smoke=args.smoke,
                                args={**vars(args), "rounds": rounds, "rows": rows}, results=results, ratios=ratios,
                                targets=TARGETS, notes=notes, machine_info=machine)
    for name, s in per_config.items():
        print(f"  {name:14s} {common.fmt_ratio(s['steps_per_sec'], 1)} steps/s")
    for key, r in ratios.items():
        print(f"  {key:20s} {common.fmt_ratio(r)}  target >= {r['target']}: {'met' if r['met'] else 'MISSED'}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
