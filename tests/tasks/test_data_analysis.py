"""family:data_analysis and family:scientific: seeded, levelled, answers that discriminate."""

from __future__ import annotations

import base64

from dojo.rewards.audit import audit_tasks
from dojo.sandbox import AsyncSandbox, Program
from dojo.tasks import load_source
from dojo.tasks.analysis import DATA_ENVIRONMENT, environment_ref, zero_like


def test_a_seed_reproduces_a_task_set() -> None:
    first = load_source("family:data_analysis?n=4&seed=7")
    again = load_source("family:data_analysis?n=4&seed=7")
    assert [t.model_dump() for t in first] == [t.model_dump() for t in again]
    assert first[0].model_dump() != load_source("family:data_analysis?n=4&seed=8")[0].model_dump()


def test_levels_go_from_one_aggregate_to_a_report_over_three_tables() -> None:
    easy = load_source("family:data_analysis?n=5&difficulty=0")
    hard = load_source("family:data_analysis?n=5&difficulty=1")
    assert all(len(t.tests) == 1 and list(t.workspace.files) == ["data/orders.csv"] for t in easy if t.workspace)
    for task in hard:
        assert len(task.tests) == 5
        assert task.workspace is not None
        assert set(task.workspace.files) == {"data/orders.parquet", "data/customers.csv", "data/products.parquet"}
        assert base64.b64decode(task.workspace.files["data/orders.parquet"])[:4] == b"PAR1"


def test_no_answer_is_a_zero_a_guess_could_match() -> None:
    for task in load_source("family:data_analysis?n=60") + load_source("family:scientific?n=60"):
        assert not any(zero_like(t.expected["value"]) for t in task.tests), task.id
        assert all(not t.visible for t in task.tests)  # the truth is never shown


def test_the_prompt_names_every_field_and_the_data() -> None:
    task = load_source("family:data_analysis?n=1&difficulty=0.8")[0]
    text = task.prompt_text()
    assert all(f'"{t.expected["field"]}"' in text for t in task.tests)
    assert "data/orders.parquet" in text and "answer.json" in text


def test_scientific_covers_its_kinds_and_declares_tolerances() -> None:
    tasks = load_source("family:scientific?n=80")
    kinds = {tag for t in tasks for tag in t.metadata.tags if not tag.startswith("level")}
    assert kinds == {"integration", "ode", "linear_algebra", "root_finding", "statistics"}
    for task in tasks:
        for test in task.tests:
            assert test.expected["rel"] > 0 and test.expected["abs"] > 0
            assert f"{test.expected['rel']:g} relative" in task.prompt_text()


async def test_audit_is_clean_on_both_families() -> None:
    tasks = load_source("family:data_analysis?n=12") + load_source("family:scientific?n=12")
    async with AsyncSandbox() as sandbox:
        report = await audit_tasks(tasks, sandbox)
    assert [t.id for t in report.unverifiable] == [], [t.problems for t in report.unverifiable]
    assert all(not t.trivial_passed for t in report.tasks)


async def test_data_analysis_runs_fork_without_scipy_imported_yet_can_import_it() -> None:
    """``dojo-data``'s zygotes import pandas but not scipy (every fork copies what a zygote imported);
    a program that wants scipy still has it, and the scientific family's runs find it imported."""
    data = load_source("family:data_analysis?n=1")[0]
    science = load_source("family:scientific?n=1")[0]
    assert (data.environment or "").startswith("dojo-data@") and (science.environment or "").startswith(
        "dojo-analysis@"
    )
    probe = "import sys\nprint('pandas' in sys.modules, 'scipy.stats' in sys.modules)\n"
    uses_scipy = probe + "from scipy import stats\nprint(stats.linregress([0, 1, 2], [1, 2, 3.5]).slope)\n"
    async with AsyncSandbox(pool_size=1) as sandbox:
        ran = [
            await sandbox.run(Program(language="python", source=source, environment=task.environment))
            for source, task in ((uses_scipy, data), (probe, science))
        ]
    assert [r.stdout.split() for r in ran] == [["True", "False", "1.25"], ["True", "True"]], [r.stderr for r in ran]


async def test_each_run_draws_its_own_unseeded_numpy_numbers() -> None:
    """Every run a slot's zygote (numpy imported) forked had drawn the same ``np.random.rand()``
    and pandas ``sample()``: unseeded sampling was the same in every rollout."""
    source = "import numpy as np, pandas as pd\nprint(np.random.rand(), pd.Series(range(100)).sample(3).tolist())\n"
    program = Program(language="python", source=source, environment=environment_ref(DATA_ENVIRONMENT))
    async with AsyncSandbox(pool_size=1, environment_pool_size=1) as sandbox:
        outputs = [(await sandbox.run(program)).stdout for _ in range(4)]
    assert len(set(outputs)) == 4 and all(outputs), outputs


async def test_a_runs_arrow_allocations_fault_in_no_huge_pages() -> None:
    """pyarrow's default pool (mimalloc) asked for 2 MB transparent huge pages: every run forked from
    a ``dojo-data`` zygote zeroed fresh ones at its first arrow allocations. The zygote makes the
    system allocator arrow's pool (``ALLOCATOR_VARIABLES``), and huge pages stay on for the process
    (numpy's large arrays ask for them). Where the kernel has transparent huge pages off altogether,
    the first holds either way."""
    source = (
        "import numpy as np, pyarrow as pa\n"
        "arrays = [pa.array(np.arange(200_000)) for _ in range(30)]\n"
        "print(pa.default_memory_pool().backend_name)\n"
        "print(next(line for line in open('/proc/self/smaps_rollup') if line.startswith('AnonHugePages')))\n"
        "status = [line for line in open('/proc/self/status') if line.startswith('THP_enabled')]\n"
        "print((status or ['THP_enabled: 1'])[0])\n"
    )
    program = Program(language="python", source=source, environment=environment_ref(DATA_ENVIRONMENT))
    async with AsyncSandbox(pool_size=1, environment_pool_size=1) as sandbox:
        result = await sandbox.run(program)
    backend, huge, enabled = [line for line in result.stdout.splitlines() if line.strip()][:3]
    assert result.ok and backend == "system", result.stderr
    assert huge.split()[1] == "0" and enabled.split()[1] == "1", (huge, enabled)
