"""Checkpoints: how long a save takes, whether it stalls training, and whether
`async_checkpoint: true` works in this TensorFlow.

1. stall: the Estimator training with a checkpoint every loop (save_checkpoints_steps =
   iterations_per_loop = 100), synchronously and with `async_checkpoint`, against never
   saving; the three alternate loop by loop (common.run_gated), so a loop's time includes
   the save that follows it. Reported as steps/s ratios against `never`.
2. save time: `Estimator.save_checkpoint()` timed directly (sync; async: the time the call
   blocks, then the time until the write has finished, `Checkpoint.sync()`).
3. async correctness (TF 2.21, `CheckpointManager.save(options=CheckpointOptions(
   experimental_enable_async_checkpoint=True))`): the save returns before the files are
   complete? the checkpoint restores to the weights AT SAVE TIME although training went on
   right after the call? `latest_checkpoint` and `max_to_keep` behave?

    .venv/bin/python benchmarks/bench_checkpoint.py [--smoke] [--workloads linear,cnn]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from bench_loop import EstimatorTrain, configure_logging  # noqa: E402

common.setup_path()

ROUNDS = {"linear": 15, "cnn": 3}
TURN = {"linear": (1, 3), "cnn": (0, 1)}  # (settle, timed) loops per turn, as in bench_loop
SAVES = {"linear": 10, "cnn": 5}


def stall(workload, pattern, batch, rounds, log, spl, runners_out: dict | None = None) -> dict:
    """Steps/s with a save after every loop (sync, async) vs never, in turns (common.run_gated);
    `runners_out` receives the runners (the smoke run's save-time and async checks reuse them)."""
    runners = {
        "never": EstimatorTrain(workload, pattern, batch, save_checkpoints_steps=None, steps_per_loop=spl),
        "every_loop": EstimatorTrain(workload, pattern, batch, save_checkpoints_steps=spl, steps_per_loop=spl),
        "every_loop_async": EstimatorTrain(workload, pattern, batch, save_checkpoints_steps=spl, steps_per_loop=spl,
                                           async_checkpoint=True),
    }
    loops = common.run_gated(runners, rounds=rounds, warmup=1, turn=TURN[workload], log=log)
    for r in runners.values():
        _sync(r.estimator)
    if runners_out is not None:
        runners_out.update(runners)
    return {"configs": {n: common.loop_stats(v, spl) for n, v in loops.items()},
            "ratios": {f"{n}/never": common.loop_ratio(loops[n], loops["never"]) for n in ("every_loop", "every_loop_async")},
            "checkpoints_on_disk": {n: sorted(p.name for p in Path(r.model_dir).glob("ckpt-*.index"))
                                    for n, r in runners.items()}}


def _sync(estimator) -> None:
    sync = getattr(estimator.state.checkpoint, "sync", None)
    if callable(sync):
        sync()


def save_times(workload, pattern, batch, saves, spl, reuse: dict | None = None) -> dict:
    """`reuse` (smoke): {"sync": runner, "async": runner} already built and trained, instead of new ones."""
    out = {}
    for kind, async_ in (("sync", False), ("async", True)):
        runner = (reuse or {}).get(kind) or EstimatorTrain(workload, pattern, batch, save_checkpoints_steps=None,
                                                           async_checkpoint=async_, steps_per_loop=spl)
        est = runner.estimator
        est.train(runner.input_fn, steps=spl, save_final_checkpoint=False)
        first_t0 = time.perf_counter()
        est.save_checkpoint()
        _sync(est)
        first = time.perf_counter() - first_t0
        call, until_written = [], []
        for _ in range(saves):
            est.state.global_step.assign_add(1)  # a new checkpoint number each save
            t0 = time.perf_counter()
            est.save_checkpoint()
            t1 = time.perf_counter()
            _sync(est)
            call.append(t1 - t0)
            until_written.append(time.perf_counter() - t0)
        size = sum(f.stat().st_size for f in Path(runner.model_dir).glob(f"ckpt-{est.state.step}.*"))
        out[kind] = {"first_save_s": first, "call_s": common.summarize(call),
                     "until_written_s": common.summarize(until_written), "checkpoint_bytes": size}
    return out


def async_correctness(workload, pattern, batch, spl, runner=None) -> dict:
    """Saves asynchronously, keeps training at once, then restores the checkpoint elsewhere.
    `runner` (smoke): an async-checkpointing runner already built, instead of a new one."""
    import numpy as np
    import tensorflow as tf

    runner = runner or EstimatorTrain(workload, pattern, batch, save_checkpoints_steps=None, async_checkpoint=True,
                                      steps_per_loop=spl)
    est = runner.estimator
    est.train(runner.input_fn, steps=spl, save_final_checkpoint=False)
    est.save_checkpoint()  # the first async save traces its copy function
    _sync(est)
    est.train(runner.input_fn, steps=spl, save_final_checkpoint=False)
    at_save = [v.numpy().copy() for v in est.model.trainable_variables]
    step_at_save = est.state.step
    t0 = time.perf_counter()
    path = est.save_checkpoint()
    call_s = time.perf_counter() - t0
    listed_right_after = sorted(p.name for p in Path(runner.model_dir).glob(f"ckpt-{step_at_save}*"))
    latest_right_after = est.latest_checkpoint()
    # Keep training while the write may still run.
    est.train(runner.input_fn, steps=spl, save_final_checkpoint=False)
    _sync(est)
    after = [v.numpy() for v in est.model.trainable_variables]
    changed_since = any(not np.array_equal(a, b) for a, b in zip(at_save, after))
    # Restore into a fresh model built by the same model function.
    spec = common.model_fn_for(workload)({**common.model_params(workload)})
    fresh = tf.train.Checkpoint(model=spec.model, step=tf.Variable(0, dtype=tf.int64))
    fresh.restore(path).expect_partial()
    restored = [v.numpy() for v in spec.model.trainable_variables]
    matches_save_time = all(np.array_equal(a, b) for a, b in zip(at_save, restored))
    # max_to_keep: more async saves than keep_checkpoint_max.
    keep = est.config.keep_checkpoint_max
    for _ in range(keep + 2):
        est.state.global_step.assign_add(1)
        est.save_checkpoint()
    _sync(est)
    kept = sorted(p.name for p in Path(runner.model_dir).glob("ckpt-*.index"))
    return {
        "save_call_s": call_s, "path": os.path.basename(path),
        "files_right_after_call": listed_right_after,
        "latest_checkpoint_right_after_call": os.path.basename(latest_right_after or ""),
        "weights_changed_after_save": changed_since,
        "restored_equals_weights_at_save": matches_save_time,
        "kept_after_more_saves": kept, "keep_checkpoint_max": keep,
        "max_to_keep_respected": len(kept) <= keep,
        "works": bool(matches_save_time and changed_since and len(kept) <= keep),
    }


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--workloads", default="linear,cnn")
        common.add_batch_size_arg(p)

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=None)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    workdir = common.temp_dir("ckpt")
    configure_logging(os.path.join(workdir, "tpuestimator.log"))
    pattern = common.write_mnist_records(os.path.join(workdir, "data"), 512 if args.smoke else 10_000)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    results, ratios = {}, {}
    for workload in args.workloads.split(","):
        rounds = args.repeats or (2 if args.smoke else ROUNDS[workload])
        log(f"{workload}: stall, {rounds} rounds")
        spl = 10 if args.smoke else common.STEPS_PER_LOOP
        runners: dict = {}
        st = stall(workload, pattern, args.batch_size, rounds, log, spl, runners)
        # smoke: the stall's Estimators serve the other two parts (each new Estimator traces its
        # loop again: half this script's smoke CPU, measuring nothing); a full run builds fresh ones
        reuse = {"sync": runners["every_loop"], "async": runners["every_loop_async"]} if args.smoke else {}
        log(f"{workload}: save times")
        sv = save_times(workload, pattern, args.batch_size, 2 if args.smoke else SAVES[workload], spl, reuse)
        log(f"{workload}: async correctness")
        ac = async_correctness(workload, pattern, args.batch_size, spl, reuse.get("async"))
        results[workload] = {"stall": st, "save_time": sv, "async_checkpoint": ac}
        for key, r in st["ratios"].items():
            ratios[f"{workload}:{key}"] = r["steps_per_sec"]
            log(f"  {workload} {key} = {common.fmt_ratio(r['steps_per_sec'])}; overall {r['overall']:.2f}")
        for kind, s in sv.items():
            log(f"  {workload} save {kind}: call {1000 * s['call_s']['median']:.1f} ms, until written "
                f"{1000 * s['until_written_s']['median']:.1f} ms, {s['checkpoint_bytes'] / 1e6:.2f} MB")
        log(f"  {workload} async: {ac}")
    path = common.write_results("checkpoint", args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios=ratios, notes=["stall ratios: steps/s with a save after every 100-step "
                                                      "loop / never saving, per round (loop by loop)"])
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
