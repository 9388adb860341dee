"""`tpuestimator debug replay BUNDLE` and `tpuestimator debug dump DIR`.

`replay` re-runs the step a NaN/Inf sentinel bundle captured, from the bundle's checkpoint,
with `tf.debugging.enable_check_numerics()`, and names the first op that produced NaN/Inf and
the source line that created it. `dump` summarizes a Debugger V2 dump (`debug.dump`).
Nothing here imports TensorFlow at import time.
"""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("debug", help="debugging tools: replay a NaN/Inf repro bundle, summarize a Debugger V2 dump",
                       description="Debugging tools for training runs (TensorFlow 2's successors of tfdbg).")
    dsub = p.add_subparsers(dest="debug_command", metavar="SUBCOMMAND")
    r = dsub.add_parser("replay", help="re-run a NaN/Inf bundle's step with check-numerics and name the op",
                        description="Re-runs the step captured by the NaN/Inf sentinel's repro bundle from its "
                                    "checkpoint with tf.debugging.enable_check_numerics(), and names the first op "
                                    "that produced NaN/Inf and its source line. Exit status 0 when the op was "
                                    "found, 1 when the step stayed finite.")
    r.add_argument("bundle", metavar="BUNDLE", help="the bundle folder (or the report folder holding bundle/)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--no-check-numerics", action="store_true",
                   help="run the step plainly and report whether the loss, gradients or weights went non-finite")
    r.set_defaults(func=run_replay)
    d = dsub.add_parser("dump", help="summarize a Debugger V2 dump folder (debug.dump.dir)",
                        description="Reads a Debugger V2 dump back and counts executions, graph execution traces "
                                    "and (FULL_HEALTH) the tensors holding NaN/Inf.")
    d.add_argument("dir", metavar="DIR")
    d.add_argument("--json", action="store_true", help="print the summary as JSON")
    d.set_defaults(func=run_dump)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def run_replay(args) -> int:
    from tpuestimator.debug.replay import replay_bundle

    result = replay_bundle(args.bundle, check_numerics=not args.no_check_numerics)
    if args.json:
        print(json.dumps(result, indent=1, default=str))
        return 0 if result["reproduced"] else 1
    print(result.get("message", ""))
    op = result.get("op")
    if op:
        print(f"  op:        {op.get('op_name') or '(eager op)'}")
        print(f"  op type:   {op.get('op_type')} (output {op.get('output_slot')})")
        print(f"  produced:  {op.get('kind')}")
        if op.get("graph"):
            print(f"  function:  {op['graph']}")
        for label, key in (("source", "source"), ("user code", "user_source")):
            src = op.get(key)
            if src:
                print(f"  {label + ':':<10} {src['file']}:{src['line']} ({src['function']})")
    elif result.get("reproduced"):
        for key in ("bad_gradients", "bad_weights"):
            if result.get(key):
                print(f"  {key.replace('_', ' ')}: {', '.join(result[key])}")
    if not result["reproduced"]:
        print("the step stayed finite on the host", file=sys.stderr)
    return 0 if result["reproduced"] else 1


def run_dump(args) -> int:
    import os

    from tpuestimator.errors import ConfigError

    if not os.path.isdir(args.dir):
        raise ConfigError("DIR", args.dir, "a Debugger V2 dump folder (debug.dump.dir)")
    from tpuestimator.debug.dumps import summarize_dump

    summary = summarize_dump(args.dir)
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    print(f"executions:             {summary['executions']} ({summary['loop_executions']} train-loop calls)")
    print(f"graph execution traces: {summary['graph_execution_traces']}")
    if summary["nonfinite"]:
        print("tensors holding NaN/Inf:")
        for item in summary["nonfinite"][:20]:
            print(f"  {item['op_name']} ({item['op_type']}): nan={item['nan']} -inf={item['neg_inf']} "
                  f"+inf={item['pos_inf']}")
    return 0
