"""`tpuestimator example NAME --out DIR`: write a bundled example (config + data)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("example", help="write a bundled example (digits, shapes) as config + data")
    p.add_argument("name", metavar="NAME", help="digits or shapes")
    p.add_argument("--out", required=True, help="folder to write into")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.examples import write_example

    path = write_example(args.name, args.out)
    print(f"config: {path}")
    print(f"train it with: tpuestimator train {path}")
    return 0
