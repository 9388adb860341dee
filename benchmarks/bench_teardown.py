"""How long freeing a distributed input iterator blocks, with and without
`tpuestimator.core.workarounds.fast_multi_device_iterator_teardown`.

MirroredStrategy over 8 logical CPU devices (the test suite's TPU rehearsal); each round
makes a distributed iterator over a repeated, prefetched dataset, runs 3 steps, waits a
moment (the autotuner's sleeps grow with the iterator's age) and times `del` + `gc.collect()`.
The work-around patches TensorFlow process-wide, so each setting runs in its own child
process, started by this script, interleaved (`--smoke`: one young iterator per setting, both
in one child, TensorFlow's own first).

    .venv/bin/python benchmarks/bench_teardown.py [--smoke]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

CHILD = textwrap.dedent('''
    import gc, json, sys, time
    import numpy as np
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
    settings, rounds, age = sys.argv[1].split(","), int(sys.argv[2]), float(sys.argv[3])
    strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
    x = np.random.RandomState(0).rand(1024, 20).astype("float32")
    freed = {}
    for setting in settings:   # "workaround" patches TensorFlow for good: it comes last
        if setting == "workaround":
            from tpuestimator.core.workarounds import fast_multi_device_iterator_teardown
            assert fast_multi_device_iterator_teardown()
        seconds = freed[setting] = []
        for _ in range(rounds):
            dist = strategy.distribute_datasets_from_function(
                lambda ctx: tf.data.Dataset.from_tensor_slices(x).repeat().batch(8, drop_remainder=True)
                .prefetch(tf.data.AUTOTUNE))
            iterator = iter(dist)
            step = tf.function(lambda it: strategy.run(tf.reduce_sum, args=(next(it),)))
            for _ in range(3):
                step(iterator)
            time.sleep(age)
            start = time.perf_counter()
            del iterator, step, dist
            gc.collect()
            seconds.append(time.perf_counter() - start)
    print(json.dumps(freed))
''')


def main() -> None:
    args = common.standard_args(__doc__, default_repeats=2)
    # Smoke: one young iterator per child (the stall this measures grows with the iterator's age,
    # and a smoke run only proves the script runs and writes its result format).
    rounds, age = (1, 0.0) if args.smoke else (5, 2.0)
    seconds: dict[str, list[float]] = {"tensorflow": [], "workaround": []}
    totals: dict[str, list[float]] = {"tensorflow": [], "workaround": []}
    # One child per setting, interleaved; smoke: one child for both, TensorFlow's first (a TensorFlow
    # start-up per child, ~8 CPU s, measures nothing there).
    children = ["tensorflow,workaround"] if args.smoke else list(seconds)
    for _ in range(args.repeats):
        for child in children:
            out = subprocess.run([sys.executable, "-c", CHILD, child, str(rounds), str(age)], check=True,
                                 capture_output=True, text=True, env=dict(os.environ)).stdout
            for setting, freed in json.loads(out.strip().splitlines()[-1]).items():
                seconds[setting] += freed
                totals[setting].append(sum(freed))
    results = {setting: {"free_s": common.summarize(v), "total_s": sum(v)} for setting, v in seconds.items()}
    # Stalls are rare and long, so the time lost per child (rounds frees) says more than a median.
    ratios = {"total_free_s tensorflow/workaround": common.summarize(
        [t / max(w, 1e-9) for t, w in zip(totals["tensorflow"], totals["workaround"])])}
    path = common.write_results("teardown", args.out, smoke=args.smoke, args={**vars(args), "rounds": rounds,
                                "iterator_age_s": age}, results=results, ratios=ratios)
    print(json.dumps({"results": results, "ratios": ratios}, indent=1))
    print(f"written: {path}")


if __name__ == "__main__":
    main()
