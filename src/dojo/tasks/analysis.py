"""What the ``analysis`` task families share: the sandbox environments their programs run in, the
answer file and how a test names one of its fields.

Two environments, adopted from this interpreter's own installs of pandas, numpy, scipy and pyarrow
(``EnvironmentStore.adopt``: no index, no network; ``pip install -e .`` from PyPI is all it needs),
once, on first use, and sharing one copy of the files: ``dojo-data`` (``family:data_analysis``),
whose zygotes import pandas, numpy and pyarrow before the first run, and ``dojo-analysis``
(``family:scientific``, ``scicode:``), whose zygotes import scipy's solvers too. scipy is installed
in both; ``dojo-data`` leaves it to the runs that import it because what a zygote has imported
is what every run's fork and exit pay for: measured (2026-12-04), fork and exit of an interpreter
that imported pandas and pyarrow cost 5.2 ms of CPU, 10.5-12.7 ms with scipy's five modules too
(their anonymous memory, 57 -> 98 MB, is copied page table by page table at every fork); a run of
``pass`` cost 14.6 ms of the machine's CPU in ``dojo-analysis``. pyarrow's allocator would start a
background thread at import (a zygote must stay single-threaded to fork): the warm-up turns it off
before importing.
"""

from __future__ import annotations

import functools
from typing import Any

from dojo.sandbox.environment import EnvironmentStore
from dojo.tasks.model import TestCase
from dojo.tasks.programs import program_source

DATA_ENVIRONMENT = "dojo-data"
ANALYSIS_ENVIRONMENT = "dojo-analysis"
ANSWER_FILE = "answer.json"
DISTRIBUTIONS = ("pandas", "numpy", "scipy", "pyarrow", "python-dateutil", "six")
# pyarrow.dataset, pandas_compat and pandas' arrow extension types are what ``pd.read_parquet`` imports
# on its first call (14 modules): imported here, not in each run.
DATA_PRELOAD = ("numpy", "pandas", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.pandas_compat",
                "pandas.core.arrays.arrow.extension_types")  # fmt: skip
SCIPY_PRELOAD = ("scipy.integrate", "scipy.optimize", "scipy.linalg", "scipy.stats", "scipy.special")
# Each run's first call of a pandas path (a CSV parsed, a merge, a groupby, the .str accessor, a
# Parquet table converted) builds lazily what the next call reuses; done once here, in the zygote,
# every run forks with it built. Measured (2026-12-04) on a level-3 reference (a Parquet and two CSV
# tables, two merges, groupbys) in a process forked after the preload: 54 ms of CPU in the run with
# the imports only, 39 ms with the modules above, 25 ms with this warm-up too. Only calls that start
# no thread: Parquet through ``ParquetFile.read(use_threads=False)`` (``read_table``, the dataset
# path, starts arrow's I/O threads, and a zygote must stay single-threaded to fork). The calls are
# ``dojo.tasks.programs.data_warmup``; ``dojo-analysis`` then warms scipy's solvers
# (``dojo.tasks.programs.scipy_warmup``).
DATA_WARMUP = (
    "import os\nos.environ.setdefault('JE_ARROW_MALLOC_CONF', 'background_thread:false')\n"
    + "".join(f"import {m}\n" for m in DATA_PRELOAD)
    + program_source("data_warmup")
)
ANALYSIS_WARMUP = DATA_WARMUP + "".join(f"import {m}\n" for m in SCIPY_PRELOAD) + program_source("scipy_warmup")


WARMUPS = {DATA_ENVIRONMENT: DATA_WARMUP, ANALYSIS_ENVIRONMENT: ANALYSIS_WARMUP}


@functools.cache
def environment_ref(name: str) -> str:
    """``<name>@<version>`` of ``dojo-data`` (data analysis: pandas imported) or ``dojo-analysis``
    (scientific: scipy's solvers too), what a generated task names: adopted on first use, once per
    process."""
    return EnvironmentStore().adopt(name, list(DISTRIBUTIONS), warmup=WARMUPS[name]).ref


def field_test(name: str, value: Any, *, rel: float = 1e-6, abs_: float = 1e-6, unordered: bool = False) -> TestCase:
    """A hidden test: the answer file's field ``name`` must hold ``value`` within the tolerances."""
    expected: dict[str, Any] = {"field": name, "value": value, "rel": rel, "abs": abs_}
    if unordered:
        expected["unordered"] = True
    return TestCase(expected=expected)


def answer_instructions(fields: list[tuple[str, str]]) -> str:
    """The part of a prompt that says what to write: each field and what it holds."""
    lines = "\n".join(f'- "{name}": {what}' for name, what in fields)
    return (
        f"Write a Python program that computes the answer and writes it to {ANSWER_FILE} in the current "
        f"directory as one JSON object with these fields:\n{lines}\n"
        "pandas, numpy and scipy are installed. Answer with the program in a ```python block; it runs in the "
        "directory that holds the files."
    )


def computed_answer(body: str, scope: dict[str, Any], what: str) -> dict[str, Any]:
    """The ``answer`` our own question code (``body``, written by a family from its templates and
    numbers, never a candidate's) computes on our own data, as JSON data."""
    import json

    namespace = {**scope, "answer": {}}
    exec(compile(body, f"<{what} questions>", "exec"), namespace)
    return dict(json.loads(json.dumps(namespace["answer"])))


def zero_like(value: Any) -> bool:
    """Whether ``value`` is what an answer file of guessed zeros would hold (0, "", [], {}), in
    whole or in part (a number of a list or object): such an answer cannot discriminate."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return abs(value) < 1e-9
    if isinstance(value, (str, list, dict)) and not value:
        return True
    if isinstance(value, list):
        return any(zero_like(v) for v in value)
    if isinstance(value, dict):
        return any(zero_like(v) for v in value.values())
    return False
