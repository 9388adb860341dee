"""`tpuestimator example NAME --out DIR [--from DIR] [--limit N]`: write an example (config + data)."""
from __future__ import annotations


def register(sub) -> None:
    p = sub.add_parser("example", help="write an example (digits, shapes, fashion_mnist) as config + data")
    p.add_argument("name", metavar="NAME", help="digits, shapes or fashion_mnist (Fashion-MNIST's IDX files from "
                   "Debian's dataset-fashion-mnist package or --from)")
    p.add_argument("--out", required=True, help="folder to write into")
    p.add_argument("--from", dest="source_dir", default=None, metavar="DIR",
                   help="fashion_mnist: the folder of its four IDX files (default /usr/share/datasets/fashion-mnist)")
    p.add_argument("--limit", type=int, default=None, metavar="N",
                   help="fashion_mnist: keep the first N training images and N/6 test images (a quick run)")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.examples import write_example

    path = write_example(args.name, args.out, source_dir=args.source_dir, limit=args.limit)
    print(f"config: {path}")
    print(f"train it with: tpuestimator train {path}")
    return 0
