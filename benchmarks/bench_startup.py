"""Time from process start to the first completed training loop: `tpuestimator train`
against a bare TF2 script doing the same work.

Each configuration is a fresh subprocess started by this script; the clock runs from just
before the process is spawned to the moment its marker line appears on its output, and the
process is then ended (by its id). Both train the `linear` workload (784 -> 10, Adam) on
the same seed-002-format records, batch 128, 100 steps per loop; the marker is printed
after the first 100-step loop (`tpuestimator train` logs `train | step:     100 ...`).

- `bare`: a script importing TensorFlow and Keras, building the dataset, the model and a
  `tf.function` loop, printing a marker after the first loop;
- `cli`: `python -m tpuestimator train CONFIG` as a user runs it (records a run);
- `cli_no_record`: the same with `--no-record --no-export`;
- `import_tf` (reference): `python -c "import tensorflow, keras"`.

Repeats interleave the configurations. Target: cli / bare <= 1.5. `--smoke` (512 records) runs
`bare` and `cli` only, one process each per repeat.

    .venv/bin/python benchmarks/bench_startup.py [--smoke]
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

TARGET = 1.5
TARGETED = ("cli", "cli_no_record")  # configurations held to TARGET (against bare)
SMOKE_CONFIGS = ("bare", "cli")
MARKER_CLI = "train | step:"
MARKER_BARE = "FIRST_LOOP_DONE"

BARE_SCRIPT = textwrap.dedent('''
    import sys
    import tensorflow as tf
    import keras

    pattern = sys.argv[1]
    spec = {"image_raw": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(serialized):
        parsed = tf.io.parse_example(serialized, spec)
        images = tf.reshape(tf.io.decode_raw(parsed["image_raw"], tf.uint8), [-1, 28, 28, 1])
        return tf.cast(images, tf.float32) / 255.0, tf.cast(parsed["label"], tf.int32)

    files = sorted(tf.io.gfile.glob(pattern))
    ds = (tf.data.TFRecordDataset(files).cache().shuffle(1024, seed=42).repeat()
          .batch(128, drop_remainder=True).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
          .prefetch(tf.data.AUTOTUNE))
    keras.utils.set_random_seed(42)
    inputs = keras.Input((28, 28, 1))
    logits = keras.layers.Dense(10)(keras.layers.Flatten()(inputs))
    model = keras.Model(inputs, logits)
    optimizer = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def loop(iterator, n):
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    iterator = iter(ds)
    loss = float(loop(iterator, tf.constant(100, tf.int64)))
    print("FIRST_LOOP_DONE", loss, flush=True)
    for _ in range(1000):  # keeps training, as the CLI would, until ended
        loop(iterator, tf.constant(100, tf.int64))
''')


def write_inputs(workdir: Path, records: int) -> tuple[Path, Path, str]:
    pattern = common.write_mnist_records(workdir / "data", records)
    config = workdir / "linear.yaml"
    section = common.data_section(pattern)
    config.write_text(textwrap.dedent(f"""\
        name: startup
        model: linear
        params: {{num_classes: 10, learning_rate: 0.01}}
        data:
          format: mnist
          train: "{section['train']}"
          cache: true
          image: {{height: 28, width: 28, channels: 1}}
        train: {{batch_size: 128, max_steps: 100000, iterations_per_loop: 100}}
        run: {{model_dir: "{workdir / 'model'}", runs_dir: "{workdir / 'runs'}"}}
        """))
    script = workdir / "bare_first_loop.py"
    script.write_text(BARE_SCRIPT)
    return config, script, pattern


def time_to_marker(cmd: list[str], marker: str | None, env: dict, timeout: float, cwd: str) -> dict:
    """Seconds from spawning `cmd` to `marker` on its stdout/stderr (or to exit when None)."""
    import shutil

    model_dir = Path(cwd) / "model"
    if model_dir.exists():  # a fresh start each time, never a resume
        shutil.rmtree(model_dir)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, text=True,
                            bufsize=1)
    lines = []
    found = None
    try:
        for line in proc.stdout:
            lines.append(line.rstrip())
            if marker is not None and marker in line:
                found = time.perf_counter() - t0
                break
            if time.perf_counter() - t0 > timeout:
                break
        if marker is None:
            proc.wait(timeout)
            found = time.perf_counter() - t0 if proc.returncode == 0 else None
    finally:
        if proc.poll() is None:
            proc.kill()  # the child this function started, by its handle
        proc.wait()
        proc.stdout.close()
    if found is None:
        raise RuntimeError(f"no marker {marker!r} from {' '.join(cmd)}; its output ends with:\n" + "\n".join(lines[-30:]))
    return {"seconds": found}


def main(argv=None) -> int:
    args = common.standard_args(__doc__.splitlines()[0], argv)
    workdir = Path(common.temp_dir("startup"))
    config, script, pattern = write_inputs(workdir, 512 if args.smoke else 10_000)
    py = sys.executable
    env = dict(os.environ, PYTHONPATH=str(common.REPO / "python"), TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    cwd = str(workdir)
    configs = {
        "bare": ([py, str(script), pattern], MARKER_BARE),
        "cli": ([py, "-m", "tpuestimator", "train", str(config)], MARKER_CLI),
        "cli_no_record": ([py, "-m", "tpuestimator", "train", str(config), "--no-record", "--no-export"], MARKER_CLI),
        "import_tf": ([py, "-c", "import tensorflow, keras"], None),
    }
    if args.smoke:  # the target's pair only: each process is a TensorFlow start-up (~9 CPU s) measuring nothing here
        configs = {name: configs[name] for name in SMOKE_CONFIGS}

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    runs = common.interleave({name: (lambda c=c, m=m: time_to_marker(c, m, env, 300, cwd)["seconds"])
                              for name, (c, m) in configs.items()}, args.repeats)
    results = {name: common.summarize(v) for name, v in runs.items()}
    ratios = {f"{name}/bare": (common.check_target(common.paired_ratio(runs[name], runs["bare"]), TARGET,
                                                   higher_is_better=False) if name in TARGETED
                               else common.paired_ratio(runs[name], runs["bare"]))
              for name in runs if name != "bare"}
    for name, s in results.items():
        log(f"  {name}: {s['median']:.2f} s (range {s['min']:.2f}-{s['max']:.2f})")
    for name, s in ratios.items():
        log(f"  {name} = {common.fmt_ratio(s)}")
    path = common.write_results("startup", args.out, smoke=args.smoke, args=vars(args),
                                results={"seconds_to_first_loop": results}, ratios=ratios,
                                targets={f"{name}/bare": TARGET for name in TARGETED if name in runs},
                                notes=["seconds from spawning the process to its marker after the first 100-step "
                                       "loop; ratios per interleaved repeat (lower is better)"])
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
