"""`tpuestimator cluster --workers N [--ps M] [--evaluator] CONFIG [train flags]`: a local
cluster of `tpuestimator train` processes (one `TF_CONFIG` each), or its Kubernetes manifest."""
from __future__ import annotations

import argparse
import sys


def register(sub) -> None:
    p = sub.add_parser(
        "cluster", help="train on a local cluster of processes (TF_CONFIG per task), or print a Kubernetes manifest",
        description="Start a local cluster on free loopback ports: each task runs `tpuestimator train CONFIG "
                    "[train flags]` with its own TF_CONFIG; their logs stream with a [worker 0] prefix; Ctrl-C or "
                    "a failing task stops them all (exit code: the failed task's). CONFIG's run.strategy must be "
                    "multi_worker or auto (or parameter_server with --ps).")
    p.add_argument("--workers", type=int, required=True, metavar="N", help="training workers (worker 0 is the chief "
                   "without --ps)")
    p.add_argument("--ps", type=int, default=0, metavar="M", help="parameter servers (adds a chief task; needs "
                   "run.strategy: parameter_server)")
    p.add_argument("--evaluator", action="store_true", help="add a side-car evaluator task")
    p.add_argument("--restarts", type=int, default=0, metavar="K",
                   help="when a task fails, restart the whole cluster up to K times (training resumes from the "
                        "chief's latest checkpoint)")
    p.add_argument("--print-k8s", action="store_true",
                   help="print a Kubernetes manifest for this cluster (a TF_CONFIG per pod) instead of running it")
    p.add_argument("--image", default="tpuestimator:latest", help="container image for --print-k8s")
    p.add_argument("--name", help="cluster name for --print-k8s (default: the config's name)")
    p.add_argument("config", metavar="CONFIG", help="YAML or JSON config file")
    p.add_argument("train_args", nargs=argparse.REMAINDER, metavar="TRAIN_FLAGS",
                   help="flags passed to every task's `tpuestimator train` (--set, --model-dir, --runs-dir, ...)")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.cluster.local_cluster import ClusterShape, run_local_cluster

    if args.print_k8s:
        from tpuestimator.cluster.kubernetes import manifest_yaml

        shape = ClusterShape(workers=args.workers, ps=args.ps, evaluator=args.evaluator)
        sys.stdout.write(manifest_yaml(shape, config_path=args.config, image=args.image, name=args.name,
                                       train_args=args.train_args))
        return 0

    def on_line(task, line: str) -> None:
        print(f"[{task.name}] {line}", flush=True)

    result = run_local_cluster(args.config, workers=args.workers, ps=args.ps, evaluator=args.evaluator,
                               train_args=args.train_args, restarts=args.restarts, on_line=on_line)
    if result.returncode:
        print(f"error: {result.failed_task} failed (exit {result.returncode}); the cluster was stopped"
              + (f" after {result.restarts} restart(s)" if result.restarts else "") + ". Its last lines:",
              file=sys.stderr)
        for line in result.last_lines:
            print(f"  [{result.failed_task}] {line}", file=sys.stderr)
        return result.returncode
    print(f"cluster finished: {args.workers} worker(s)" + (f", {args.ps} ps" if args.ps else "")
          + (" and an evaluator" if args.evaluator else "")
          + (f" after {result.restarts} restart(s)" if result.restarts else ""))
    return 0
