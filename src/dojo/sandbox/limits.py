"""Resource limits of one run. Every field has a safe default and can be set per call."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from dojo.sandbox.guest.wire import RunLimits
from dojo.sandbox.network import NetworkPolicy

MiB = 1 << 20
SCRATCH_FILESYSTEMS = 3  # a run's work dir, /tmp and /dev/shm: each a tmpfs of ``Limits.disk`` bytes


class Limits(BaseModel):
    """Limits for one execution step. Times in seconds, sizes in bytes.

    ``network`` is ``none`` by default: the run sees only a private loopback, never the host's;
    ``allow`` lists what it may reach; ``host`` opens the host's network (see ``dojo.sandbox.network``).
    ``True``/``False`` still mean ``host``/``none``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    wall_time: float = Field(10.0, gt=0, le=3600, description="Wall-clock seconds before the run is killed.")
    cpu_time: float = Field(5.0, gt=0, le=3600, description="CPU seconds (user+system) of the run.")
    memory: int = Field(512 * MiB, ge=4 * MiB, le=64 << 30, description="Memory of the whole process tree.")
    processes: int = Field(64, ge=1, le=4096, description="Processes and threads alive at once.")
    output: int = Field(
        1 * MiB,
        ge=1,
        le=256 * MiB,
        description="Bytes kept of stdout and of stderr; more kills the run.",
    )
    file_size: int = Field(16 * MiB, ge=0, le=1 << 30, description="Largest file the run may write.")
    disk: int = Field(
        64 * MiB,
        ge=1 * MiB,
        le=4 << 30,
        description="Size of each scratch filesystem (work dir, /tmp, /dev/shm).",
    )
    open_files: int = Field(256, ge=8, le=65536, description="Open file descriptors per process.")
    network: Annotated[NetworkPolicy, BeforeValidator(NetworkPolicy.coerce)] = Field(
        default_factory=NetworkPolicy,
        description="none (private loopback only), allow (listed destinations), or host (the host's network).",
    )

    @property
    def fetched_bytes(self) -> int:
        """The most bytes a run's fetched files hold in all: what its scratch file systems can hold
        (the fetch reads nothing else), so files the run wrote out in full fit; past it (one file
        fetched again through links, sparse files) the rest is cut (256 links to one 16 MiB file
        had been 4 GiB of answer)."""
        return SCRATCH_FILESYSTEMS * self.disk

    def merged(self, **overrides: Any) -> Limits:
        """A copy with some fields replaced (validated)."""
        return Limits.model_validate({**self.model_dump(), **overrides})

    def to_wire(self, address_space_extra: int = 0) -> RunLimits:
        """A run step's limits as the zygote reads them; ``address_space_extra``: what a runtime maps
        beyond what it uses (the JVM, Go), added to the memory limit where it is an address-space one."""
        return {
            "wall_s": self.wall_time,
            "cpu_s": self.cpu_time,
            "memory_bytes": self.memory,
            "processes": self.processes,
            "output_bytes": self.output,
            "file_size_bytes": self.file_size,
            "open_files": self.open_files,
            "address_space_extra": address_space_extra,
        }


DEFAULT_LIMITS = Limits()
DEFAULT_COMPILE_LIMITS = Limits(wall_time=30.0, cpu_time=20.0, memory=1024 * MiB, processes=32, output=256 * 1024)
