"""A run's source archive, ``tfruns.d/source.tar.gz``: the config file that was run (or the
config itself for a dict config) and the resolved config, as tfruns and R's ``untar()`` read it.

Nothing here imports TensorFlow.
"""
from __future__ import annotations

import io
import json
import os
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tpuestimator.system.io import json_safe


def tar_gz_bytes(files: Mapping[str, bytes], *, mtime: float | None = None) -> bytes:
    """A gzipped tar of ``source/<name>`` members in GNU format with integer mtimes.

    Python's default (pax) format writes pax extended headers for float mtimes, and R's
    ``untar()`` warns "using pax extended headers" on every read (RUN_FORMAT.md, rule 10).
    """
    now = int(time.time() if mtime is None else mtime)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as tar:
        dirs = {"source"}
        for name in files:
            parts = name.split("/")[:-1]
            for i in range(len(parts)):
                dirs.add("/".join(["source", *parts[:i + 1]]))
        for folder in sorted(dirs):
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, now
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"source/{name}")
            info.size, info.mode, info.mtime = len(data), 0o644, now
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def read_tar_members(path: str | os.PathLike) -> dict[str, bytes]:
    """The files of a ``source.tar.gz`` as {name under source/: bytes} ({} when unreadable)."""
    out: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar.getmembers():
                if member.isfile():
                    fh = tar.extractfile(member)
                    if fh is not None:
                        name = member.name[len("source/"):] if member.name.startswith("source/") else member.name
                        out[name] = fh.read()
    except (OSError, tarfile.TarError, EOFError):
        return {}
    return out


def source_files(script: str | os.PathLike | None, script_name: str,
                 config: Mapping[str, Any] | None) -> dict[str, bytes]:
    """The archive's members: the script (the config file, when it exists) as `script_name`,
    else `config` written under that name (JSON or YAML by its suffix); and the resolved config
    as ``resolved_config.yaml``."""
    files: dict[str, bytes] = {}
    path = Path(str(script)) if script else None
    if path is not None and path.is_file():
        files[script_name] = path.read_bytes()
    else:
        cfg = json.loads(json.dumps(json_safe(dict(config or {})), default=str))
        if script_name.endswith(".json"):
            files[script_name] = (json.dumps(cfg, indent=2) + "\n").encode()
        else:
            files[script_name] = yaml.safe_dump(cfg, sort_keys=False).encode()
    if config and "resolved_config.yaml" not in files:
        cfg = json.loads(json.dumps(json_safe(dict(config)), default=str))
        files["resolved_config.yaml"] = yaml.safe_dump(cfg, sort_keys=False).encode()
    return files
