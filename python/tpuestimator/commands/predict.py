"""`tpuestimator predict EXPORT_DIR FILE...`: predictions from an exported SavedModel."""
from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict with an export on TFRecord or image files (JSON lines out)")
    p.add_argument("export_dir", metavar="EXPORT_DIR")
    p.add_argument("files", metavar="FILE", nargs="+")
    p.add_argument("--limit", type=int, default=None, help="print at most this many predictions")
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.io import json_safe
    from tpuestimator.serving import predict

    rows = predict(args.export_dir, args.files)
    for row in rows[: args.limit]:
        clean = {k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()}
        print(json.dumps(json_safe(clean)))
    return 0
