"""serving.resolve_export_dir: the one answer to "which export does this folder mean" (issue 20.2:
R's tpu_predict() of a model dir and the command line now agree)."""
from __future__ import annotations

import pytest

from tpuestimator.errors import ConfigError
from tpuestimator.serving.exports import resolve_export_dir


def _export(path):
    path.mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"")
    return str(path)


@pytest.mark.quick("serving")
def test_a_model_dir_means_its_newest_final_then_best_then_other_export(tmp_path):
    model = tmp_path / "m"
    latest = _export(model / "export" / "latest" / "900")
    assert resolve_export_dir(str(model)) == latest
    best = _export(model / "export" / "best" / "300")
    _export(model / "export" / "best" / "200")
    assert resolve_export_dir(str(model)) == best
    _export(model / "export" / "final" / "900")
    final = _export(model / "export" / "final" / "1500")
    assert resolve_export_dir(str(model)) == final
    assert resolve_export_dir(final) == final  # an export itself


def test_a_run_folder_means_its_export_and_an_empty_folder_is_an_error(tmp_path):
    run = tmp_path / "run"
    export = _export(run / "export")
    assert resolve_export_dir(str(run)) == export
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="EXPORT_DIR"):
        resolve_export_dir(str(tmp_path / "empty"))
