"""The JSON files both languages read: ``config.schema.json`` (config.py) and
``run_columns.json``, the columns of a runs listing and their types (runs/query.py, and R's
tpu_ls_runs() through the R package's ``inst/schema/run_columns.json``, a link to this file)."""
from __future__ import annotations

import json
from importlib import resources

RUN_COLUMNS_RESOURCE = "run_columns.json"


def run_columns() -> dict:
    """The run columns' types and order (``run_columns.json``)."""
    return json.loads(resources.files("tpuestimator.schema").joinpath(RUN_COLUMNS_RESOURCE).read_text())
