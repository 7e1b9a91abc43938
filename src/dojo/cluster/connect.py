"""Joining a Ray cluster, with a clear error when there is none: ``connect``, ``ClusterUnavailable``.

``address`` is what ``ray start --head`` printed (``HOST:PORT`` of the cluster's GCS), ``auto`` (the
cluster this machine belongs to, as ``ray.init("auto")``) or ``local`` (start a one-machine cluster
in this process, for trying the fleet out).
"""

from __future__ import annotations

import logging
import socket
from typing import Any

from dojo.errors import DojoError

NAMESPACE = "dojo"


class ClusterUnavailable(DojoError):
    """No Ray cluster at the address, or none of its nodes can run dojo's sandbox; the message says
    what to fix."""


def check_address(address: str) -> None:
    """Fail fast, before Ray retries for a minute, when nothing listens at ``HOST:PORT``."""
    if address in ("auto", "local") or address.startswith("ray://"):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ClusterUnavailable(
            f"--ray {address!r} is not a Ray address: give HOST:PORT of the head node (what 'ray start "
            "--head' printed, e.g. 127.0.0.1:6379), 'auto' (this machine's cluster) or 'local' (start one here)"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=5):
            pass
    except OSError as e:
        raise ClusterUnavailable(
            f"no Ray cluster answers at {address} ({e.strerror or e}); start one with 'ray start --head "
            "--port PORT' on the head node, or fix the address"
        ) from e


def connect(address: str) -> bool:
    """Connect this process to the cluster; True when this call started Ray (close it with ``ray.shutdown``)."""
    import ray

    check_address(address)
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {
        "namespace": NAMESPACE,
        "logging_level": logging.WARNING,
        "log_to_driver": False,
        "configure_logging": False,
    }
    try:
        if address == "local":
            ray.init(include_dashboard=False, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, TimeoutError, RuntimeError) as e:
        raise ClusterUnavailable(
            f"could not join the Ray cluster at {address!r}: {e}. Start one with 'ray start --head', or pass "
            "its address (HOST:PORT)"
        ) from e
    return True
