"""Cost of the hooks and of the NaN/Inf sentinel on training throughput (steps/s).

ONE Estimator (one model, one input pipeline, one thread) trains in every configuration in
turn: each repeat runs every configuration for `--loops` device loops, in an order that
rotates each repeat, switching only what is compared between `train()` calls:

- `bare`: no hooks, `nan_sentinel` off;
- `sentinel`: no hooks, the NaN/Inf sentinel on (the default);
- `default_hooks`: what `tpuestimator train` runs: LoggingHook (to a log file, as the run
  record's output.log) + SummaryHook (TensorBoard scalars) + ProgressBarHook (a no-op when
  stderr is not a TTY) + HParamsHook (writes only at the end), sentinel on;
- `control`: the same as `sentinel` (an A/A control: control/sentinel shows the bias and
  noise of the measurement itself on this machine);
- `host_call`: default_hooks + HostCallHook (every step's loss written on the host;
  informational: it switches the device loop to one that records every step).

A loop's time runs from one loop boundary to the next (the device loop, the loop's metric
read, the sentinel and every hook's host work); the first and the last loop of each `train()`
call are not timed (the per-call set-up and end, where SummaryHook writes and flushes its
buffered scalars, are reported apart: a job calls `train()` once per evaluation period).
Per repeat, each configuration's fastest timed loop (the one least disturbed by the other
users of the shared cores) gives its steps/s; the ratios are per repeat (same second, same
machine load), then the median over repeats; the median-loop ratio is reported beside it.
A "direct" section times the hooks' callbacks and the sentinel's extra device read per loop.
(Separate Estimators alternating in threads, as bench_loop.py does, showed a bias of up to
2x by construction order on this 2-core machine, far above the 2% measured here, so this
script keeps one Estimator.)

Targets: sentinel/bare >= 0.98 and default_hooks/sentinel >= 0.98 (each costs at most 2% of
steps/s). The workload is the `linear` model (784 -> 10): the device step is tiny, so every
host millisecond per loop shows; with a real model the relative cost is smaller still.

    .venv/bin/python benchmarks/bench_hooks.py [--smoke] [--repeats N] [--loops 3] [--steps-per-loop 100]
"""
from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

common.setup_path()

CONFIGS = ("bare", "sentinel", "control", "default_hooks", "host_call")
TARGETS = {"sentinel/bare": 0.98, "default_hooks/sentinel": 0.98}
RATIOS = (("sentinel", "bare"), ("default_hooks", "sentinel"), ("default_hooks", "bare"),
          ("host_call", "default_hooks"), ("control", "sentinel"))
REPEATS = 100


class _NotATTY:
    def isatty(self):
        return False

    def write(self, text):
        pass

    def flush(self):
        pass


class Bench:
    """One Estimator; `run(config, loops)` trains `loops` loops in that configuration and
    returns the timed loops' (wall s, cpu s) and the call's set-up time."""

    def __init__(self, pattern: str, batch: int, steps_per_loop: int):
        from tpuestimator.core.estimator import Estimator, RunConfig

        self.model_dir = common.temp_dir("hooks")
        self.logs = os.path.join(self.model_dir, "logs")
        self.steps_per_loop = steps_per_loop
        self.config = RunConfig(model_dir=self.model_dir, train_batch_size=batch, iterations_per_loop=steps_per_loop,
                                save_checkpoints_steps=None, nan_sentinel=True)
        self.estimator = Estimator(common.model_fn_for("linear"), self.config,
                                   params={"num_classes": common.NUM_CLASSES, "learning_rate": 0.001})

        def input_fn(params):
            return common.mnist_dataset(pattern, params["batch_size"], seed=params["seed"])

        self.input_fn = input_fn
        self._hooks: dict = {}

    def hooks(self, config: str) -> list:
        from tpuestimator.hooks.builtin import LoggingHook, ProgressBarHook, SummaryHook
        from tpuestimator.hooks.host_call import HostCallHook
        from tpuestimator.hooks.hparams import HParamsHook

        if config not in self._hooks:
            hooks: list = []
            if config in ("default_hooks", "host_call"):
                hooks = [LoggingHook(1), SummaryHook(self.logs), ProgressBarHook(None, stream=_NotATTY()),
                         HParamsHook(self.logs, {"model": "linear", "learning_rate": 0.001})]
            if config == "host_call":
                hooks.append(HostCallHook(self.logs))
            self._hooks[config] = hooks
        return self._hooks[config]

    def run(self, config: str, loops: int) -> tuple[list, float]:
        from tpuestimator.core.hooks import Hook

        est = self.estimator
        sentinel = config != "bare"
        if est.config.nan_sentinel != sentinel:
            est.config = dataclasses.replace(self.config, nan_sentinel=sentinel)
        marks: list = []

        class Boundary(Hook):  # last, so every other hook's work falls inside the timed interval
            def before_loop(self, step):
                marks.append((time.perf_counter(), time.process_time()))

        t0 = time.perf_counter()
        est.train(self.input_fn, steps=loops * self.steps_per_loop, hooks=[*self.hooks(config), Boundary()],
                  save_final_checkpoint=False)
        end = (time.perf_counter(), time.process_time())
        marks.append(end)
        intervals = [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:])]
        setup = (marks[0][0] - t0) if marks else 0.0
        # Timed: the loops in the middle of the call. The first loop follows the switch of
        # configuration; the last one holds the call's end (hooks' `end`: SummaryHook writes
        # and flushes its file there), reported apart as a per-call cost.
        middle = intervals[1:-1]
        end_extra = intervals[-1][0] - statistics.median(w for w, _ in middle) if middle else 0.0
        return middle, setup + end_extra


class HookTimer:
    """Wraps hooks' callbacks to time the host work they add (per loop and per train() call)."""

    def __init__(self, hooks):
        self.loop: dict[int, float] = {}
        self.call: list[float] = []
        self._loop_index = 0
        self._first = hooks[0] if hooks else None
        for hook in hooks:
            for event in ("before_loop", "after_loop", "begin", "end"):
                setattr(hook, event, self._wrap(hook, getattr(hook, event), event))

    def _wrap(self, hook, fn, event):
        def wrapped(*args):
            if event == "before_loop" and hook is self._first:
                self._loop_index += 1
            t = time.perf_counter()
            try:
                return fn(*args)
            finally:
                dt = time.perf_counter() - t
                if event in ("before_loop", "after_loop"):
                    self.loop[self._loop_index] = self.loop.get(self._loop_index, 0.0) + dt
                else:
                    self.call.append(dt)
        return wrapped

    def per_loop_ms(self) -> float:
        return 1000 * statistics.median(self.loop.values()) if self.loop else 0.0

    def per_call_ms(self) -> float:
        return 1000 * sum(self.call) / max(1, len(self.call) // 2) if self.call else 0.0  # begin + end


def sentinel_read_cost(bench: Bench, calls: int = 300) -> dict:
    """ms per loop of the loop's metric read with and without the sentinel's finiteness check
    (the sentinel's only device work), alternating calls; plus its host-side check."""
    from tpuestimator.core.loops import make_loop_reader

    est = bench.estimator
    metrics = {"loss": est.state.train_metrics["loss"]}
    plain = make_loop_reader(metrics)
    checked = make_loop_reader(metrics, est.state.model.trainable_variables)
    times = {"plain": [], "checked": []}
    for fn in (plain, checked):
        fn()
    for i in range(calls):
        for name, fn in (("plain", plain), ("checked", checked)) if i % 2 else (("checked", checked), ("plain", plain)):
            t = time.perf_counter()
            {k: v.numpy() for k, v in fn().items()}
            times[name].append(time.perf_counter() - t)
    plain_ms, checked_ms = (1000 * statistics.median(times[k]) for k in ("plain", "checked"))
    return {"sentinel_read_extra_ms_per_loop": max(0.0, checked_ms - plain_ms), "loop_read_ms": plain_ms}


def _loop_stats(loops, steps_per_loop: int) -> dict:
    """steps/s per loop and CPU ms per 100 steps (summarized) of (wall s, cpu s) loops."""
    return {"steps_per_sec": common.summarize([steps_per_loop / w for w, _ in loops]),
            "cpu_ms_per_100_steps": common.summarize([1000 * c * 100 / steps_per_loop for _, c in loops])}


def configure_logging(path: str) -> None:
    """The tpuestimator log goes to a file at INFO, as `tpuestimator train` records output.log.

    It does not propagate to the root logger (where absl installs a stderr handler once
    TensorFlow is imported): a line per loop on a terminal or pipe wakes another process,
    which on 2 shared cores measured as a further ~3% for this tiny model. That is the cost
    of showing progress on a console, not of the hooks.
    """
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("tpuestimator")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--configs", default=",".join(CONFIGS))
        p.add_argument("--records", type=int, default=None, help="random records to generate (default 10000)")
        p.add_argument("--batch-size", type=int, default=128)
        p.add_argument("--steps-per-loop", type=int, default=None,
                       help=f"iterations_per_loop (default {common.STEPS_PER_LOOP}; smoke 10)")
        p.add_argument("--loops", type=int, default=3, help="timed loops per configuration per repeat (+2 untimed)")
        p.add_argument("--name", default="hooks", help="result file name (<out>/<name>.json)")

    args = common.standard_args(__doc__.splitlines()[0], argv, extra, default_repeats=None)
    args.steps_per_loop = args.steps_per_loop or (10 if args.smoke else common.STEPS_PER_LOOP)
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    workdir = common.temp_dir("hooks")
    configure_logging(os.path.join(workdir, "tpuestimator.log"))
    records = args.records or (512 if args.smoke else 10_000)
    pattern = common.write_mnist_records(os.path.join(workdir, "data"), records)
    configs = tuple(args.configs.split(","))
    repeats = args.repeats or (2 if args.smoke else REPEATS)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    bench = Bench(pattern, args.batch_size, args.steps_per_loop)
    for name in configs:  # warm-up: tracing of every loop and hook function
        bench.run(name, 3)
    loops_per_run = 1 if args.smoke else args.loops
    log(f"linear: {configs}, {repeats} repeats x {loops_per_run} loops of {args.steps_per_loop} steps")
    fastest = {name: [] for name in configs}  # steps/s per repeat: the repeat's least-disturbed loop
    typical = {name: [] for name in configs}  # steps/s per repeat: the repeat's median loop
    cpu_per_repeat = {name: [] for name in configs}
    setups = {name: [] for name in configs}
    all_loops = {name: [] for name in configs}
    timer = HookTimer(bench.hooks("default_hooks")) if "default_hooks" in configs else None
    t0 = time.perf_counter()
    for r in range(repeats):
        k = r % len(configs)
        for name in configs[k:] + configs[:k]:
            loops, setup = bench.run(name, loops_per_run + 2)
            all_loops[name].extend(loops)
            fastest[name].append(args.steps_per_loop / min(w for w, _ in loops))
            typical[name].append(args.steps_per_loop / statistics.median(w for w, _ in loops))
            cpu_per_repeat[name].append(statistics.median(c for _, c in loops))
            setups[name].append(setup)
        if (r + 1) % max(1, repeats // 5) == 0:
            log(f"    repeat {r + 1}/{repeats}")
    log(f"  {repeats} repeats in {time.perf_counter() - t0:.0f}s")
    results = {"configs": {n: {**_loop_stats(all_loops[n], args.steps_per_loop),
                               "steps_per_sec_fastest_loop_per_repeat": common.summarize(fastest[n]),
                               "steps_per_sec_median_loop_per_repeat": common.summarize(typical[n]),
                               "train_call_overhead_ms": common.summarize([1000 * v for v in setups[n]])}
                           for n in configs},
               "plan": {"repeats": repeats, "loops_per_repeat": loops_per_run, "steps_per_loop": args.steps_per_loop,
                        "batch_size": args.batch_size, "workload": "linear", "warmup_loops_per_config": 3, "untimed_loops_per_call": 2}}
    ratios, targets = {}, {}
    for a, b in RATIOS:
        if a in fastest and b in fastest:
            key = f"{a}/{b}"
            r = common.summarize([x / y for x, y in zip(fastest[a], fastest[b])])
            med = common.summarize([x / y for x, y in zip(typical[a], typical[b])])
            cpu = common.summarize([y / x for x, y in zip(cpu_per_repeat[a], cpu_per_repeat[b]) if x > 0])
            results.setdefault("ratios", {})[key] = {"steps_per_sec": r, "steps_per_sec_median_loops": med,
                                                     "cpu_efficiency": cpu}
            target = TARGETS.get(key)
            ratios[key] = common.check_target(r, target) if target else r
            if target:
                targets[key] = target
            log(f"  {key} = {common.fmt_ratio(r)} (fastest loops; median [min-max] of {len(fastest[a])} repeats); "
                f"median loops {common.fmt_ratio(med)}; cpu-efficiency {common.fmt_ratio(cpu)}"
                + (f"; target >= {target}: {'met' if ratios[key]['met'] else 'MISSED'}" if target else ""))
    for name, c in results["configs"].items():
        log(f"  {name}: {c['steps_per_sec_fastest_loop_per_repeat']['median']:.1f} steps/s (fastest loop, median "
            f"of repeats), {c['steps_per_sec_median_loop_per_repeat']['median']:.1f} (median loop); cpu "
            f"{c['cpu_ms_per_100_steps']['median']:.2f} ms/100 steps; per train() call (set-up + end) "
            f"{c['train_call_overhead_ms']['median']:.1f} ms")
    # Direct measures: what the hooks and the sentinel add to each loop, in ms, beside the loop time.
    loop_ms = 1000 * args.steps_per_loop / statistics.median(fastest.get("bare") or fastest[configs[0]])
    direct = {"bare_loop_ms": loop_ms}
    if timer is not None:
        direct["default_hooks_host_ms_per_loop"] = timer.per_loop_ms()
        direct["default_hooks_host_ms_per_train_call"] = timer.per_call_ms()
    direct.update(sentinel_read_cost(bench))
    for key, value in list(direct.items()):
        if key != "bare_loop_ms":
            direct[f"{key}_fraction_of_loop"] = value / loop_ms
    results["direct"] = direct
    log("  direct: " + ", ".join(f"{k} {v:.4f}" for k, v in direct.items()))
    path = common.write_results(args.name, args.out, smoke=args.smoke, args=vars(args), results=results,
                                ratios=ratios, targets=targets,
                                notes=["one Estimator; configurations alternate train() call by train() call, in "
                                       "an order rotating each repeat; a loop's time runs from one loop boundary "
                                       "to the next (all host work of the hooks, the sentinel and the loop's "
                                       "metric read included); the first loop of each call is not timed; ratios "
                                       "are per repeat (each configuration's fastest loop of the repeat: the least "
                                       "disturbed by other users of the 2 shared cores; the median loop's ratio is "
                                       "kept too), then the median over repeats", "direct: the hooks' own host "
                                       "time per loop (timed callbacks) and the sentinel's extra device read per "
                                       "loop, in ms and as a fraction of the bare loop"])
    log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
