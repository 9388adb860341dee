"""A loaded `JobConfig` given to the job with `--set` overrides keeps its source (the run record's
`script`), and one training job reads its data manifest once (the data section is resolved
several times: preflight, the model's params, each input, the exports)."""
from __future__ import annotations

import shutil

import pytest

from tpuestimator.runs import run_info


def test_a_loaded_config_with_overrides_keeps_its_source_and_reads_its_manifest_once(tmp_path, fixtures_dir,
                                                                                     monkeypatch):
    from tpuestimator import manifest
    from tpuestimator.config import load_config
    from tpuestimator.jobs.job import run_job

    folder = tmp_path / "parity"  # a manifest path no earlier test read in this process
    shutil.copytree(fixtures_dir / "parity", folder)
    reads: list[str] = []
    read = manifest.read_manifest_file

    def counted(path):
        reads.append(path)
        return read(path)

    monkeypatch.setattr(manifest, "read_manifest_file", counted)
    cfg = load_config(folder / "parity.yaml", ["run.seed=2"])
    result = run_job(cfg, overrides=["train.max_steps=10", "eval.every_n_steps=10"], model_dir=str(tmp_path / "m"),
                     runs_dir=str(tmp_path / "runs"))
    props = run_info(result.run_dir)["properties"]
    assert props["script"] == "parity.yaml" and props["global_step"] == 10
    assert result.config["run"]["seed"] == 2 and result.config["train"]["max_steps"] == 10
    assert reads == [str(folder / "manifest.json")], reads


def test_with_overrides_keeps_the_source_resolves_paths_beside_it_and_validates(tmp_path, fixtures_dir):
    from tpuestimator.config import load_config
    from tpuestimator.errors import ConfigError

    cfg = load_config(fixtures_dir / "parity" / "parity.yaml", ["run.seed=2"])
    changed = cfg.with_overrides(["data.train=train-*.tfrecord", "train.max_steps=5"])
    assert changed.source == cfg.source and changed.overrides == ("run.seed=2", "data.train=train-*.tfrecord",
                                                                  "train.max_steps=5")
    assert changed.data.train == str(fixtures_dir / "parity" / "train-*.tfrecord") and changed.train.max_steps == 5
    assert cfg.with_overrides([]) is cfg
    with pytest.raises(ConfigError, match="train.max_steps"):
        cfg.with_overrides(["train.max_steps=-1"])


def test_a_manifest_is_read_again_when_it_changes(tmp_path, fixtures_dir, monkeypatch):
    import json
    import os

    from tpuestimator import manifest as manifests
    from tpuestimator.data import spec

    folder = tmp_path / "parity"
    shutil.copytree(fixtures_dir / "parity", folder)
    reads: list[str] = []
    read = manifests.read_manifest_file
    monkeypatch.setattr(manifests, "read_manifest_file", lambda path: reads.append(path) or read(path))
    section = {"manifest": str(folder)}
    assert spec.resolve_section(section).manifest_num_classes == 3
    assert spec.resolve_section(section).manifest_num_classes == 3 and len(reads) == 1
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "num_classes": 4}))
    stat = os.stat(folder / "manifest.json")
    os.utime(folder / "manifest.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert spec.resolve_section(section).manifest_num_classes == 4 and len(reads) == 2
