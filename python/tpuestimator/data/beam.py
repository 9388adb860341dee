"""Conversion at scale: the TFRecord writer as an Apache Beam pipeline (the `beam` extra).

The plan (items per split, label ids, vocabulary) comes from `writers.plan_write` and each
item is encoded by the same `encode.RecordEncoder` the local writer uses, so both writers
produce the same records. Any Beam runner works (`runner=`; DirectRunner locally, e.g.
DataflowRunner with `--project/--region/--temp_location` pipeline options); with a remote
runner the image paths must be readable by the workers (e.g. gs:// paths).

`write_tfrecords(..., beam=True)` and `tpuestimator data write ... --beam` call `run_plan`.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Sequence

from tpuestimator.data import encode
from tpuestimator.errors import DataError

log = logging.getLogger(__name__)


def _import_beam():
    try:
        import apache_beam as beam
    except ImportError:
        raise DataError("--beam needs Apache Beam: pip install 'tpuestimator[beam]' (apache-beam and crcmod), "
                        "or write without --beam.") from None
    return beam


def pipeline_options(runner: str = "DirectRunner", extra: Sequence[str] = ()):
    """`PipelineOptions` for `runner`; `extra` flags (``--project=...``) are passed through and win."""
    _import_beam()
    from apache_beam.options.pipeline_options import PipelineOptions

    return PipelineOptions([f"--runner={runner}", *extra])


def run_plan(plan, out_dir: str, *, shards: int, runner: str = "DirectRunner",
             pipeline_options: Sequence[str] = ()) -> dict[str, list[str]]:
    """Runs a `writers.WritePlan` as a Beam pipeline writing `shards` files per split into `out_dir`.

    Returns:
      split -> the shard file names written (relative to `out_dir`).
    """
    beam = _import_beam()
    options = globals()["pipeline_options"](runner, pipeline_options)
    splits = [s for s, items in plan.items.items() if items]
    log.info("running the TFRecord writer on Beam's %s (%s)", runner,
             ", ".join(f"{s}: {len(plan.items[s])} items" for s in splits))
    with beam.Pipeline(options=options) as p:
        for split in splits:
            (p
             | f"Create {split}" >> beam.Create(plan.items[split], reshuffle=False)
             | f"Encode {split}" >> beam.Map(plan.encoder)
             | f"Write {split}" >> beam.io.WriteToTFRecord(
                 os.path.join(out_dir, split), file_name_suffix=".tfrecord", num_shards=shards,
                 shard_name_template="-SSSSS-of-NNNNN"))
    files = {}
    for split in splits:
        names = [encode.shard_name(split, i, shards) for i in range(shards)]
        for name in names:
            path = os.path.join(out_dir, name)
            if not os.path.exists(path):  # a runner that skips empty shards
                open(path, "wb").close()
            os.chmod(path, 0o644)
        files[split] = names
    return files
