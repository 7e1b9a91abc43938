"""What a slot's zygote does once so that its runs do not: the common modules imported and one run
rehearsed (``preload``), an environment's packages imported and warmed up (``preload_environment``).

Runs inside the sandbox, in the zygote: standard library only. The host imports
``THREAD_POOL_VARIABLES`` too (a run in an environment gets them).
"""

from __future__ import annotations

import builtins
import os
import sys
from typing import Any

from dojo.sandbox.guest.ending import install_quitters, note_zygote_blocks

# Imported once by the zygote so that runs do not pay for them; kept small (idle memory per slot).
PYTHON_PRELOAD = (
    "typing", "collections", "itertools", "functools", "math", "re", "heapq", "bisect", "string",
    "copy", "operator", "io", "traceback", "atexit", "threading", "random", "types", "linecache",
)  # fmt: skip

# What keeps numerical libraries from starting thread pools when the zygote imports them.
THREAD_POOL_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                         "VECLIB_MAXIMUM_THREADS", "RAYON_NUM_THREADS", "POLARS_MAX_THREADS")  # fmt: skip

# What the zygote's allocators are told before an environment's modules load: pyarrow's pool is
# the system allocator (glibc), not mimalloc. mimalloc asks for transparent huge pages: each forked
# run's first arrow allocations faulted in fresh 2 MB pages and zeroed them, in a process that lives
# ~20 ms. Turning that off in mimalloc (MIMALLOC_ALLOW_THP=0) turns huge pages off for the whole
# process (prctl PR_SET_THP_DISABLE): numpy's 64 MB arrays then took 73 ms a round against 19 (a
# review, 2026-12-07). Measured (2026-12-07, audits of 400 data-analysis tasks, interleaved, 3
# rounds): 52.4 ms of machine CPU a task (median) with the system pool, 56.3 with mimalloc as it
# comes, 56.5 with its huge pages off.
ALLOCATOR_VARIABLES = {"ARROW_DEFAULT_MEMORY_POOL": "system"}

# A run's path, rehearsed once by the zygote (``preload``): a typed function, a class, comprehensions,
# an f-string, print.
REHEARSAL = """
from typing import List

def has_close(numbers: List[float], threshold: float) -> bool:
    for i, a in enumerate(numbers):
        for j, b in enumerate(numbers):
            if i != j and abs(a - b) < threshold:
                return True
    return False

class Box:
    size: int = 1

    def grow(self, *args, **kwargs):
        return [i * 2 for i in range(10) if i % 2] + sorted({k: v for k, v in kwargs.items()})

assert has_close([1.0, 2.0, 3.9, 4.0], 0.3), f"{has_close!r}"
print(sum(int(x) for x in "1 2 3".split()), Box().grow(a=1), "done")
"""


def preload(libc: Any) -> int:
    """Import common modules and rehearse one run, so children start on warm memory; returns the
    address space then (``vm_size``).

    Page faults are what a forked child pays for (several microseconds each in a VM): the
    first ``compile()`` or stream set-up in a fresh process touches a few hundred new pages.
    Doing it once here leaves those paths warm for every child (1.4 ms -> 0.1 ms measured).
    """
    import gc
    import importlib
    import io

    install_quitters()
    for name in PYTHON_PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    null = os.open("/dev/null", os.O_RDWR)
    saved = sys.stdout
    try:
        for _ in range(3):
            out = io.TextIOWrapper(io.BufferedWriter(io.FileIO(null, "w", closefd=False)),
                                   encoding="utf-8", errors="surrogateescape")  # fmt: skip
            code = compile(REHEARSAL, "/box/main.py", "exec", dont_inherit=True)
            sys.stdout = out
            exec(code, {"__name__": "__rehearsal__", "__builtins__": builtins})
            out.flush()
    finally:
        sys.stdout = saved
        os.close(null)
    gc.collect()
    gc.freeze()  # forked children never scan (and so never copy) the zygote's objects
    libc.malloc_trim(0)  # give freed heap back: idle memory per slot is what scales
    note_zygote_blocks()
    return vm_size()


def preload_environment(config: dict[str, Any]) -> None:
    """An environment's slot: its packages on ``sys.path`` and the modules it declares imported
    here, once, so every run forks with them (``import pandas`` costs a run nothing). Their
    thread pools are held at one thread: the zygote must stay single-threaded to fork."""
    paths = list(config.get("python_paths") or [])
    sys.path[0:0] = paths
    modules = list(config.get("preload_modules") or [])
    if not modules and not config.get("warmup"):
        return
    import importlib

    for var in THREAD_POOL_VARIABLES:
        os.environ[var] = "1"
    os.environ.update(ALLOCATOR_VARIABLES)
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as e:
            why = f"{type(e).__name__}: {e}"
            raise RuntimeError(f"the environment's module {name!r} failed to import: {why}") from e
    warmup = config.get("warmup") or ""
    if warmup:
        try:
            exec(compile(warmup, "<environment warm-up>", "exec", dont_inherit=True), {"__name__": "__dojo_warmup__"})
        except BaseException as e:
            raise RuntimeError(f"the environment's warm-up failed: {type(e).__name__}: {e}") from e
    import atexit
    import shutil

    # a temporary directory made here, to be removed at exit (matplotlib's config, with no writable
    # home), is in the zygote's /tmp, not a run's: each run's exit printed a FileNotFoundError's
    # traceback on its stderr (every /run_code answer carried one)
    atexit.unregister(shutil.rmtree)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise RuntimeError(
            f"importing {', '.join(modules)} started {threads - 1} thread(s) in the zygote; a slot can only "
            "fork single-threaded: leave that module out of the preload list"
        )


def vm_size() -> int:
    """This process's address space in bytes (an inline run's RLIMIT_AS starts from it)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0
