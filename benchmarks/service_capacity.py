"""Input-worker capacity for the tf.data service: records/s of the decode + augment pipeline.

Runs the TRAINING pipeline of the `shapes` example (JPEG, the format of TPUEstimator's
flowers example, flip augmentation, batch 128) on `--size` x `--size` images (32: the
example as generated; 224: the flowers example's size), in two ways, interleaved:

- local: the pipeline in this process (what one tf.data service worker runs);
- service: the same pipeline through a local tf.data service with ONE worker (in this
  process), read back by this process: the worker's rate with the RPC hop included.

Besides records/s (wall time: depends on the load of a shared machine) it reports records
per CPU-second of this process (`records_per_cpu_s`): the per-core capacity, which the load
of other processes hardly changes. Pin the process to one core (`taskset -c 0`) for a
per-core wall-time figure too. Prints JSON.

    taskset -c 0 .venv/bin/python benchmarks/service_capacity.py --size 224
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


def write_shapes(out: str, n: int, size: int) -> str:
    import numpy as np
    import tensorflow as tf

    from tpuestimator.data import encode
    from tpuestimator.examples.shapes import CLASSES, draw_shape, jpeg_bytes

    rng = np.random.default_rng(0)
    path = os.path.join(out, f"shapes-{size}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(n):
            label = i % len(CLASSES)
            writer.write(encode.flowers_example(jpeg_bytes(draw_shape(CLASSES[label], rng, size)), label + 1,
                                                CLASSES[label]))
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--records", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    import tensorflow as tf

    from tpuestimator.data import spec as specs
    from tpuestimator.data.bench import rate
    from tpuestimator.data.pipeline import build_dataset
    from tpuestimator.data.service import start_local_service

    tf.get_logger().setLevel("ERROR")
    out = tempfile.mkdtemp(prefix="tpue-service-capacity-")
    path = write_shapes(out, args.records, args.size)
    service = start_local_service(dispatcher_port=0, workers=1)
    section = {"format": "flowers", "train": path, "image": {"height": args.size, "width": args.size, "channels": 3},
               "augment": {"flip_left_right": True}}
    local = specs.resolve_section(section)
    remote = specs.resolve_section({**section, "service": service.address})

    def dataset(sec, job=None):
        return build_dataset(sec, "train", path, batch_size=args.batch_size, seed=0, service_job=job)

    rates: dict[str, list[float]] = {"local": [], "service": []}
    per_cpu: dict[str, list[float]] = {"local": [], "service": []}

    def measure(name, ds):
        cpu = time.process_time()
        result = rate(ds, seconds=args.seconds, warmup=3)
        cpu = time.process_time() - cpu
        rates[name].append(result["records_per_s"])
        # the warm-up batches ran on the same CPU clock: count them too
        per_cpu[name].append(result["records_per_s"] * result["seconds"] / cpu * (1 + 3 / max(1, result["batches_per_s"] * result["seconds"])))

    for i in range(args.rounds):
        measure("local", dataset(local))
        measure("service", dataset(remote, f"capacity-{i}"))
    service.stop()
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(json.dumps({"size": args.size, "batch_size": args.batch_size, "cpus": cpus,
                      "load_average": os.getloadavg()[0],
                      **{f"{k}_records_per_s": round(statistics.median(v)) for k, v in rates.items()},
                      **{f"{k}_records_per_cpu_s": round(statistics.median(v)) for k, v in per_cpu.items()},
                      "rounds": {k: [round(x) for x in v] for k, v in rates.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
