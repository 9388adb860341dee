"""A full disk (issue 13, failure 5), tested for real: a 3 MB tmpfs mounted in an unprivileged user
and mount namespace (`unshare -rm`), so writes fail with a real ENOSPC.

One `DiskFullError` (exit code 3) naming the folder, its free space and what was kept; the last
complete checkpoint intact and loadable (and a rerun with more space resumes from it); no temp
leftovers (`ckpt-N_temp/`, `.export.*.tmp`, run-record temp files); a runs folder that fills after
training keeps the trained checkpoints and exports and says so.
"""
from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import pytest
import tensorflow as tf

from helpers import one_clear_error, without_sklearn
from tpuestimator.errors import DiskFullError

pytestmark = pytest.mark.real_process  # TPUESTIMATOR_STRESS=N repeats these (conftest.py)

REPO = Path(__file__).resolve().parents[2]
DIGITS = REPO / "python" / "tpuestimator" / "examples" / "digits"


def _digits(tmp: Path) -> Path:
    shutil.copytree(DIGITS, tmp / "digits")
    return tmp / "digits" / "digits.yaml"


@pytest.mark.quick("system")
def test_disk_full_is_recognised_in_its_three_forms():
    from tpuestimator.system.diskspace import is_disk_full

    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(shutil.Error([("a", "b", "[Errno 28] No space left on device")]))
    assert is_disk_full(tf.errors.ResourceExhaustedError(None, None, "ckpt_temp/part; No space left on device"))
    assert not is_disk_full(tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))


def test_partial_checkpoint_files_are_removed_and_complete_ones_kept(tmp_path):
    from tpuestimator.core.checkpointing import remove_partial_checkpoint

    for name in ("ckpt-100.index", "ckpt-100.data-00000-of-00001", "ckpt-150.index", "config.yaml"):
        (tmp_path / name).write_text("x")
    for temp in ("ckpt-150_temp", "ckpt-200_temp"):
        (tmp_path / temp).mkdir()
        (tmp_path / temp / "part-00000.tempstate1").write_text("x")
    removed = remove_partial_checkpoint(str(tmp_path), 100)
    assert sorted(Path(p).name for p in removed) == ["ckpt-150.index", "ckpt-150_temp", "ckpt-200_temp"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-100.data-00000-of-00001", "ckpt-100.index",
                                                          "config.yaml"]


def _unshare_works() -> bool:
    if not (shutil.which("unshare") and shutil.which("nsenter")):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /tmp"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


needs_tmpfs = pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -rm` (an unprivileged user and "
                                 "mount namespace) and `nsenter` to mount a tiny tmpfs: a real full disk without root")


class Namespace(NamedTuple):
    python: str   # the launcher: `python` whose runs are forks of the server in the namespace
    pid: int      # the server's, to enter its namespace with `nsenter -t`


@pytest.fixture(scope="module")
def namespace(tmp_path_factory) -> Namespace:
    """A fork server started in a user and mount namespace of its own (`unshare -rm`, as a user
    without root makes one), whose runs are the tests' `tpuestimator` processes. A test enters
    that namespace (`nsenter`) to mount its tmpfs, so the runs see it; they are real processes
    (their exit codes, files and errors are the product's) without a TensorFlow import each
    (~5 CPU s: fork_python.py). conftest.py's `forked_python` cannot serve here: its server,
    outside the namespace, would not see the mount."""
    import fork_python
    from conftest import cli_env

    server, launcher = fork_python.start(tmp_path_factory.mktemp("fork-python-ns"), cli_env(),
                                         wrapper=("unshare", "-rm"))
    yield Namespace(str(launcher), server.pid)
    fork_python.stop(server)


def _on_tiny_disk(tmp_path: Path, namespace: Namespace, env: dict, command: str, *,
                  filler_bytes: int = 0) -> subprocess.CompletedProcess:
    """Runs `command` (bash, in tmp_path, in the namespace) with tmp_path/tiny a 3 MB tmpfs; copies
    it to tmp_path/after, then unmounts it."""
    (tmp_path / "tiny").mkdir()
    # `cd`: entering a mount namespace moves a process to its root
    script = (f"set -u; cd {shlex.quote(str(tmp_path))} || exit 99; mount -t tmpfs -o size=3m tmpfs tiny || exit 99; "
              f"head -c {filler_bytes} /dev/zero > tiny/filler; {command}; rc=$?; "
              "rm -f tiny/filler; cp -a tiny after; umount tiny; exit $rc")
    # --preserve-credentials: as a user without root, nsenter's own switch to uid 0 fails (the
    # namespace denies setgroups); joining it gives the capabilities to mount anyway
    return subprocess.run(["nsenter", "-t", str(namespace.pid), "-U", "-m", "--preserve-credentials", "--",
                           "bash", "-c", script],
                          env=without_sklearn(env), cwd=tmp_path,  # as on the core install (2 CPU s less)
                          capture_output=True, text=True, timeout=400)


def _leftovers(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*")
            if p.name.endswith((".tmp", "_temp")) or ".tmp." in p.name or "tempstate" in p.name]


@pytest.mark.slow
@needs_tmpfs
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_full_model_dir_disk_one_error_last_checkpoint_intact_no_leftovers(tmp_path, namespace, python_env,
                                                                           asynchronous):
    """3 MB hold ckpt-10, ckpt-20 (about 1 MB each, Adam's slots included) and the best export of
    step 20; the checkpoint of step 30 does not fit. An asynchronous save reports it one save later.
    (Ten steps a save, not 50: the sizes do not depend on the steps, the CPU time does.)"""
    config = _digits(tmp_path)
    cli = f"{namespace.python} -m tpuestimator train {config} --runs-dir runs --model-dir tiny/m " + " ".join(
        ["--set train.max_steps=40", "--set train.iterations_per_loop=10", "--set train.save_checkpoints_steps=10",
         "--set eval.every_n_steps=20", f"--set train.async_checkpoint={str(asynchronous).lower()}"])
    # then more space (the tmpfs remounted at 30 MB) and the same command: it resumes and finishes
    rerun = "" if asynchronous else f"; cp -a tiny before; mount -o remount,size=30m tiny && {cli} > rerun.log 2>&1; " \
                                    "echo $? > rerun.rc; (exit $rc)"
    proc = _on_tiny_disk(tmp_path, namespace, python_env, f"{cli}; rc=$?{rerun}" if rerun else cli)
    if not asynchronous:
        assert (tmp_path / "rerun.rc").read_text().strip() == "0", (tmp_path / "rerun.log").read_text()[-3000:]
        assert "restored tiny/m/ckpt-20 at global step 20" in (tmp_path / "rerun.log").read_text()
        assert tf.train.latest_checkpoint(str(tmp_path / "after" / "m")).endswith("ckpt-40")
        shutil.rmtree(tmp_path / "after")
        (tmp_path / "before").rename(tmp_path / "after")
    line = one_clear_error(proc, 3, "No space left on the disk holding tiny/m while writing the checkpoint of "
                           "step 30", "KiB free there", "Its partial files were removed",
                           "the last complete checkpoint, tiny/m/ckpt-20, is intact", "run the same command again")
    model_dir = tmp_path / "after" / "m"
    assert _leftovers(model_dir) == []
    latest = tf.train.latest_checkpoint(str(model_dir))
    assert latest and os.path.basename(latest) in line
    reader = tf.train.load_checkpoint(latest)  # loadable, with the model's weights and the step
    step_key = next(k for k in reader.get_variable_to_shape_map() if k.startswith("step/"))
    assert f"ckpt-{reader.get_tensor(step_key)}" == os.path.basename(latest)
    run = sorted((tmp_path / "runs").iterdir())[0]  # the run that hit the full disk (then the rerun's)
    assert (run / "tfruns.d" / "properties" / "completed").read_text().strip() == "FALSE"
    assert "DiskFullError" in json.loads((run / "tfruns.d" / "error.json").read_text())["message"]


@pytest.mark.slow
@needs_tmpfs
def test_full_runs_folder_after_training_keeps_checkpoints_and_exports(tmp_path, namespace, python_env):
    config = _digits(tmp_path)
    cli = (f"{namespace.python} -m tpuestimator train {config} --runs-dir tiny/runs --model-dir m "
           "--set train.max_steps=20 --set train.iterations_per_loop=10 --set train.save_checkpoints_steps=10 "
           "--set eval.every_n_steps=20 --set 'export.exporters=[final]'")  # the final export is what it keeps
    # ~160 KB left: the run record starts; its plots and the export's copy (about 430 KB) do not fit
    proc = _on_tiny_disk(tmp_path, namespace, python_env, cli, filler_bytes=3 * 2 ** 20 - 160 * 1024)
    one_clear_error(proc, 3, "while writing the run record", "Training finished at global step 20",
                    "checkpoints in m", "the final export in m/export/final/20", "completed=FALSE",
                    "no need to train again")
    assert tf.train.latest_checkpoint(str(tmp_path / "m")).endswith("ckpt-20")
    assert (tmp_path / "m" / "export" / "final" / "20" / "saved_model.pb").exists()
    assert (tmp_path / "m" / "export" / "final" / "20" / "assets.extra" / "tpuestimator.json").exists()
    assert _leftovers(tmp_path / "after") == [] and _leftovers(tmp_path / "m") == []
    run = next((tmp_path / "after" / "runs").iterdir())
    assert (run / "tfruns.d" / "properties" / "completed").read_text().strip() == "FALSE"


def test_disk_full_error_message_names_folder_free_space_and_fix(tmp_path):
    from tpuestimator.system.diskspace import translate_disk_full

    with pytest.raises(DiskFullError) as info:
        with translate_disk_full(tmp_path / "export", "SavedModel export", kept="The partial export was removed."):
            raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "export" / "x"))
    err = info.value
    assert err.path == str(tmp_path / "export") and err.what == "SavedModel export" and err.free_bytes > 0
    assert str(err).startswith(f"No space left on the disk holding {tmp_path / 'export'} while writing the "
                               "SavedModel export (")
    assert "The partial export was removed. Free some space there" in str(err)


@pytest.mark.slow
@needs_tmpfs
def test_full_export_disk_removes_the_partial_export_and_keeps_checkpoints(tmp_path, namespace, python_env):
    config = _digits(tmp_path)
    cli = (f"{namespace.python} -m tpuestimator train {config} --runs-dir runs --model-dir m "
           "--set export.dir=tiny/exp --set train.max_steps=10 --set train.iterations_per_loop=10 "
           "--set train.save_checkpoints_steps=10 --set eval.every_n_steps=10")
    # ~200 KB left: the SavedModel (about 430 KB) does not fit
    proc = _on_tiny_disk(tmp_path, namespace, python_env, cli, filler_bytes=3 * 2 ** 20 - 200 * 1024)
    one_clear_error(proc, 3, "No space left on the disk holding tiny/exp/best while writing the SavedModel "
                    "export", "The partial export was removed; the checkpoints in m are unaffected")
    assert [p.name for p in (tmp_path / "after" / "exp" / "best").iterdir()] == []
    assert tf.train.latest_checkpoint(str(tmp_path / "m")).endswith("ckpt-10")
