"""The default folder of a table model (`tables.api.default_table_dir`), which R asks for too."""
from __future__ import annotations

import os

from tpuestimator.tables.api import default_table_dir


def test_a_table_model_trains_in_models_table_label_model_or_beside_its_tfruns_run(tmp_path):
    assert default_table_dir("mpg", "linear") == os.path.join("models", "table-mpg-linear")
    assert default_table_dir("mpg", "dnn") != default_table_dir("mpg", "linear")  # two models, two folders
    run = tmp_path / "runs" / "2026-12-02T10-00-00Z"
    assert default_table_dir("mpg", "dnn", run) == str(tmp_path / "runs" / ".models" / "2026-12-02T10-00-00Z")
