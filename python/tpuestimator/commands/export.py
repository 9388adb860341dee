"""`tpuestimator export MODEL_DIR [--out DIR] [--format tflite [--quantize MODE]] [--warmup N]`: a
SavedModel (signatures serving_default, image_bytes, features) or a verified .tflite file from the
latest checkpoint."""
from __future__ import annotations

from tpuestimator.commands.train import add_set_flag

QUANTIZE = ("none", "dynamic", "float16", "int8")  # litert.QUANTIZE_MODES (not imported: --help stays fast)


def register(sub) -> None:
    p = sub.add_parser("export", help="export the latest checkpoint as a versioned SavedModel or a .tflite file")
    p.add_argument("model_dir", metavar="MODEL_DIR")
    p.add_argument("--out", help="export base folder (default: MODEL_DIR/export/manual)")
    p.add_argument("--format", choices=("saved_model", "tflite"), default="saved_model")
    p.add_argument("--quantize", choices=QUANTIZE, default=None,
                   help="tflite only: none (float32, default), dynamic (int8 weights), float16, or int8 "
                        "(full integer, calibrated on training records)")
    p.add_argument("--representative-batches", type=int, default=None, metavar="N",
                   help="int8: training batches to calibrate on (default: export.representative_batches)")
    p.add_argument("--warmup", type=int, default=None, metavar="N",
                   help="write N TF Serving warmup requests into assets.extra/ (default: export.warmup)")
    add_set_flag(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from tpuestimator.jobs.model_dir_jobs import export_model

    result = export_model(args.model_dir, args.out, format=args.format, quantize=args.quantize, warmup=args.warmup,
                          representative_batches=args.representative_batches, overrides=args.overrides)
    print(f"export: {result.path}")
    if result.path != result.saved_model:
        print(f"saved model: {result.saved_model}")
    if result.warmup_requests:
        print(f"warmup requests: {result.warmup_requests} (assets.extra/tf_serving_warmup_requests)")
    report = result.tflite
    if report:
        rules = {"max_abs_diff": "max |diff| <= {:g}", "top1_agreement": "top-1 agreement >= {:.0%}",
                 "max_rel_diff": "max |diff| / max(1, |prediction|) <= {:g}",
                 "rms_diff_over_std": "RMS diff <= {:.0%} of the predictions' std"}
        rule = ", ".join(rules[k].format(v) for k, v in report["threshold"].items())
        if "top1_agreement" in report:  # a classifier
            figures = f"top-1 agreement {report['top1_agreement']:.2%}, max |diff| {report['max_abs_diff']:.2e}"
        else:  # a regressor: its predictions
            figures = (f"max |diff| {report['max_abs_diff']:.2e} (relative {report['max_rel_diff']:.2e}), "
                       f"RMS diff / std {report['rms_diff_over_std']:.2e}")
        print(f"tflite ({report['quantize']}): {report['tflite_bytes']:,} bytes (SavedModel: "
              f"{report['saved_model_bytes']:,} bytes)")
        print(f"verified against the SavedModel on {report['examples']} {report['verified_on']} examples: "
              f"{figures}: {'PASS' if report['passed'] else 'FAIL'} ({rule})")
        return 0 if report["passed"] else 1
    return 0
