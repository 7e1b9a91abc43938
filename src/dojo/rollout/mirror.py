"""A run directory copied to object storage: ``mirror_dir`` (checkpoints, reports, metrics).

Training writes to a local directory (the trainer's checkpoints must be on a local disk); each
save and the end of the run copy what changed to ``url`` (``s3://bucket/prefix``, any fsspec URL).
Each file is one object, visible only when its upload completes; ``MANIFEST.json`` is written last,
listing every file with its size, so a reader trusts what the manifest lists: a copy killed midway
leaves the previous manifest in place, naming only complete files.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from dojo.rollout.store import open_url

MANIFEST = "MANIFEST.json"


def mirror_dir(local: Path, url: str, storage_options: dict[str, Any] | None = None) -> dict[str, int]:
    """Copy the files of ``local`` that are new or changed (by size and mtime, after the last
    manifest) to ``url``; then write the manifest. Returns the manifest's files and sizes."""
    fs, root = open_url(url, storage_options)
    root = root.rstrip("/")
    manifest_path = f"{root}/{MANIFEST}"
    try:
        with fs.open(manifest_path, "rb") as f:
            previous = json.loads(f.read())
    except FileNotFoundError:
        previous = {"files": {}, "mtimes": {}}
    files: dict[str, int] = {}
    mtimes: dict[str, float] = {}
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        rel = path.relative_to(local).as_posix()
        if rel == MANIFEST:
            continue
        stat = path.stat()
        files[rel], mtimes[rel] = stat.st_size, stat.st_mtime
        if previous["files"].get(rel) == stat.st_size and previous["mtimes"].get(rel) == stat.st_mtime:
            continue
        fs.put_file(str(path), f"{root}/{rel}")
    body = {"files": files, "mtimes": mtimes, "written_at": time.time(), "host": os.uname().nodename}
    with fs.open(manifest_path, "wb") as f:
        f.write(json.dumps(body, indent=1).encode())
    return files


def read_manifest(url: str, storage_options: dict[str, Any] | None = None) -> dict[str, int]:
    """The complete files of a mirrored run (their sizes), by its manifest; {} when none."""
    fs, root = open_url(url, storage_options)
    fs.invalidate_cache(root)
    try:
        with fs.open(f"{root.rstrip('/')}/{MANIFEST}", "rb") as f:
            files: dict[str, int] = json.loads(f.read())["files"]
    except FileNotFoundError:
        return {}
    return files
