"""Runs every benchmark and rewrites the figures in benchmarks/README.md.

    .venv/bin/python benchmarks/run_all.py            # everything (about 10 minutes on 2 cores)
    .venv/bin/python benchmarks/run_all.py --smoke    # seconds-to-minutes: checks the scripts run
    .venv/bin/python benchmarks/run_all.py --only loop,startup
    .venv/bin/python benchmarks/run_all.py --report-only   # the README table from results/*.json

Each script runs in its own process (a fresh TensorFlow) and writes results/<name>.json;
the README's text between `<!-- figures:begin -->` and `<!-- figures:end -->` is then
regenerated from those files. Smoke runs write to a temporary folder and leave the README alone.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

# name -> script. bench_input.py and bench_hooks.py belong to other owners; they run when
# present: bench_hooks.py with the `--smoke` / `--out` contract (common.standard_args),
# bench_input.py with its own arguments (it writes input_results.md).
SCRIPTS = {"loop": "bench_loop.py", "eval": "bench_eval.py", "checkpoint": "bench_checkpoint.py",
           "startup": "bench_startup.py", "input": "bench_input.py", "hooks": "bench_hooks.py",
           "tables_speed": "bench_tables_speed.py", "tables_input": "bench_tables_input.py",
           "tables_quality": "bench_tables_quality.py", "fashion_mnist": "bench_fashion_mnist.py"}
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def run_scripts(names, out: Path, smoke: bool) -> dict:
    status = {}
    for name in names:
        script = HERE / SCRIPTS[name]
        if not script.exists():
            status[name] = "absent"
            continue
        cmd = [sys.executable, str(script), *_args(name, out, smoke)]
        print(f"== {name}: {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=_env())
        status[name] = "ok" if proc.returncode == 0 else f"failed ({proc.returncode})"
        print(f"== {name}: {status[name]} in {time.perf_counter() - t0:.0f} s", flush=True)
    return status


def _args(name: str, out: Path, smoke: bool) -> list[str]:
    if name == "input":  # bench_input.py writes input_results.md itself (its own --out is that file)
        return ["--smoke", "--out", str(out / "input_results.md")] if smoke else []
    return ["--out", str(out)] + (["--smoke"] if smoke else [])


def _env():
    import os

    return dict(os.environ, PYTHONPATH=str(common.REPO / "python"), TF_CPP_MIN_LOG_LEVEL="2")


# ---------------------------------------------------------------------------- report
def _load(results: Path, name: str):
    path = results / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _r(stats, digits=2):
    if not stats or stats.get("median") is None:
        return "n/a"
    f = f"{{:.{digits}f}}".format
    return f"**{f(stats['median'])}** ({f(stats['p25'])}-{f(stats['p75'])}; {f(stats['min'])}-{f(stats['max'])}; n={stats['n']})"


def _target_cell(stats):
    if not stats or "target" not in stats:
        return "", ""
    op = ">=" if stats.get("higher_is_better", True) else "<="
    if stats.get("met") is None:
        return f"{op} {stats['target']}", "n/a"
    if stats["met"]:
        return f"{op} {stats['target']}", "met"
    return f"{op} {stats['target']}", f"MISSED by {100 * stats['miss_by']:.0f}%"


def render(results: Path) -> str:
    loop, ev, ck, st = (_load(results, n) for n in ("loop", "eval", "checkpoint", "startup"))
    any_result = next((x for x in (loop, ev, ck, st) if x), None)
    lines = []
    if any_result is None:
        return "No results yet: run `.venv/bin/python benchmarks/run_all.py`.\n"
    m = any_result["machine"]
    lines += [f"Machine: {m.get('cpu_model')}, {m.get('logical_cpus')} logical CPUs "
              f"({m.get('usable_cpus', '?')} usable), {m.get('memory_gib', '?')} GiB, "
              f"{m.get('hypervisor_vendor', 'bare metal') and 'VM (' + str(m.get('hypervisor_vendor')) + ')'}; "
              f"TensorFlow {m.get('tensorflow')}, Keras {m.get('keras')}, Python {m.get('python')}; "
              f"GPUs: {', '.join(m.get('gpus') or []) or 'none'}.",
              ""]
    dates = ", ".join(f"{d['benchmark']} {d['created'][:16]} (load {_load_str(d)})"
                      for d in (loop, ev, ck, st) if d)
    lines += [f"Runs: {dates}.", ""]
    if any(d and d.get("smoke") for d in (loop, ev, ck, st)):
        lines += ["**Smoke results (tiny sizes): not measurements.**", ""]
    lines += ["Ratios: **median** (inter-quartile range; min-max; n = rounds or repeats), paired within "
              "a round so that load from other users hits both sides alike.", ""]

    lines += ["### Targets", "", "| ratio | measured | target | |", "|---|---|---|---|"]
    for d in (loop, ev, st):
        if not d:
            continue
        for key, stats in d["ratios"].items():
            if "target" in stats:
                t, verdict = _target_cell(stats)
                lines.append(f"| {d['benchmark']} {key} | {_r(stats)} | {t} | {verdict} |")
    lines.append("")

    if loop:
        lines += ["### Training loop (steps/s, median per 100-step loop)", "",
                  "| workload | config | steps/s | IQR | CPU ms / 100 steps | vs bare |", "|---|---|---|---|---|---|"]
        for workload, res in loop["results"].items():
            for name, c in res["configs"].items():
                s = c["steps_per_sec"]
                vs = res["ratios"].get(f"{name}/bare", {}).get("steps_per_sec") if name != "bare" else None
                lines.append(f"| {workload} | {name} | {s['median']:.1f} | {s['p25']:.0f}-{s['p75']:.0f} | "
                             f"{c['cpu_ms_per_100_steps']['median']:.1f} | {_r(vs) if vs else ''} |")
        lines.append("")
    if ev:
        lines += ["### Evaluation and prediction (examples/s, whole passes)", "",
                  "| workload | config | examples/s | CPU us / example | vs bare | vs bare, CPU per pass |",
                  "|---|---|---|---|---|---|"]
        for workload, res in ev["results"].items():
            for name, c in res["configs"].items():
                vs = res["ratios"].get(f"{name}/bare")
                eff = res.get("cpu_efficiency", {}).get(f"{name}/bare")
                us = c.get("cpu_us_per_example", {}).get("median")
                lines.append(f"| {workload} | {name} | {c['examples_per_sec']['median']:.0f} | "
                             f"{'' if us is None else f'{us:.0f}'} | {_r(vs) if vs else ''} | {_r(eff) if eff else ''} |")
        chk = {w: r["checks"] for w, r in ev["results"].items()}
        lines += ["", "Same work: " + "; ".join(
            f"{w}: accuracy estimator {c['eval_accuracy_estimator']:.4f} / bare {c['eval_accuracy_bare']:.4f}, "
            f"same predicted classes {c['predict_same_classes']}" for w, c in chk.items()), ""]
    if ck:
        lines += ["### Checkpoints", "",
                  "| workload | save every loop (sync) vs never | save every loop (async) vs never | "
                  "save sync ms | async: call ms / until written ms | size MB | async works |",
                  "|---|---|---|---|---|---|---|"]
        for workload, res in ck["results"].items():
            r, sv, ac = res["stall"]["ratios"], res["save_time"], res["async_checkpoint"]
            lines.append(
                f"| {workload} | {_r(r['every_loop/never']['steps_per_sec'])} | "
                f"{_r(r['every_loop_async/never']['steps_per_sec'])} | "
                f"{1000 * sv['sync']['until_written_s']['median']:.1f} | "
                f"{1000 * sv['async']['call_s']['median']:.1f} / {1000 * sv['async']['until_written_s']['median']:.1f} | "
                f"{sv['sync']['checkpoint_bytes'] / 1e6:.2f} | {ac['works']} |")
        lines.append("")
    tables = [d for d in (_load(results, n) for n in ("tables_speed", "tables_input", "tables_quality")) if d]
    if tables:
        lines += ["### Tables (issue 21: canned models on tables; details in tables_quality_results.md)", "",
                  "| ratio | measured | target | |", "|---|---|---|---|"]
        for d in tables:
            for key, stats in d["ratios"].items():
                if "target" in stats:
                    t, verdict = _target_cell(stats)
                    lines.append(f"| {d['benchmark']} {key} | {_r(stats)} | {t} | {verdict} |")
        lines.append("")
    if st:
        lines += ["### Start-up (seconds from process start to the first completed 100-step loop)", "",
                  "| config | seconds | vs bare |", "|---|---|---|"]
        for name, s in st["results"]["seconds_to_first_loop"].items():
            vs = st["ratios"].get(f"{name}/bare")
            lines.append(f"| {name} | {s['median']:.2f} ({s['min']:.2f}-{s['max']:.2f}) | {_r(vs) if vs else ''} |")
        lines.append("")
    return "\n".join(lines)


def _load_str(d):
    m = d["machine"]
    a, b = m.get("loadavg_at_start"), m.get("loadavg_at_end")
    return f"{a[0]:.1f}->{b[0]:.1f}" if a and b else "?"


def write_readme(readme: Path, table: str) -> None:
    text = readme.read_text() if readme.exists() else f"# Benchmarks\n\n{BEGIN}\n{END}\n"
    if BEGIN not in text or END not in text:
        text += f"\n{BEGIN}\n{END}\n"
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--only", default=None, help=f"comma-separated subset of {', '.join(SCRIPTS)}")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--results", default=str(common.RESULTS_DIR))
    parser.add_argument("--readme", default=str(HERE / "README.md"))
    args = parser.parse_args(argv)
    results = Path(args.results)
    status = {}
    if not args.report_only:
        if args.smoke and args.results == str(common.RESULTS_DIR):
            results = Path(tempfile.mkdtemp(prefix="tpue-bench-smoke-"))
        names = args.only.split(",") if args.only else list(SCRIPTS)
        status = run_scripts(names, results, args.smoke)
        print("status:", status)
    if args.smoke and not args.report_only:
        print(render(results))
        return 0 if all(s in ("ok", "absent") for s in status.values()) else 1
    write_readme(Path(args.readme), render(results))
    print(f"wrote {args.readme}")
    return 0 if all(s in ("ok", "absent") for s in status.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
