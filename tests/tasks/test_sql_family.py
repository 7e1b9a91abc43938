"""family:sql: questions made from the Spider databases' own data, graded by the query's result."""

from __future__ import annotations

import collections
import re

from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox
from dojo.tasks import generate_tasks, load_source
from dojo.tasks.intercode_sql import gold_output
from dojo.tasks.sql_family import LEVELS, MIN_COUNT
from tests.sandbox.conftest import requires_isolation


def test_questions_are_reproducible_levelled_and_show_the_whole_schema() -> None:
    first = load_source("family:sql?n=30&seed=4")
    assert [t.prompt for t in first] == [t.prompt for t in load_source("family:sql?n=30&seed=4")]
    assert [t.prompt for t in first] != [t.prompt for t in load_source("family:sql?n=30&seed=5")]
    for level, difficulty in zip(LEVELS, (0.0, 0.5, 1.0), strict=True):
        tasks = generate_tasks("sql", n=20, seed=1, difficulty=difficulty)
        assert all(t.metadata.tags[0] == level for t in tasks), level
    joins = generate_tasks("sql", n=20, seed=1, difficulty=1.0)
    assert all("refer" in t.prompt and " JOIN " in (t.reference or "") for t in joins)
    for t in first:  # the columns are in the prompt, not only the tables' names
        assert re.search(r'CREATE TABLE "\w+" \(\n\s+"\w+"', t.prompt), t.prompt[:300]


def test_answers_discriminate_a_constant_does_not_guess_them() -> None:
    tasks = load_source("family:sql?n=400&seed=0")
    for t in tasks:
        expected = t.tests[0].expected
        assert expected.strip(), t.id
        if expected.strip().isdigit():
            assert int(expected) >= MIN_COUNT, t.id
        db = t.metadata.tags[1]
        gold = (t.reference or "").split("\n")[1].rstrip(";")
        assert gold_output(db, gold) == expected
    top, share = collections.Counter(t.tests[0].expected for t in tasks).most_common(1)[0]
    assert share / len(tasks) < 0.05, (top, share)


@requires_isolation
async def test_the_gold_passes_in_the_sandbox_and_near_misses_fail(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    for task in generate_tasks("sql", n=6, seed=2, difficulty=(0.0, 1.0)):
        gold = (task.reference or "").split("\n")[1].rstrip(";")
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        near_misses = (
            f"SELECT * FROM ({gold}) LIMIT 1 OFFSET 1",
            "SELECT 1",
            f"SELECT * FROM ({gold}) ORDER BY 1 DESC",
        )
        for wrong in near_misses:
            if gold_output(task.metadata.tags[1], wrong) == task.tests[0].expected:
                continue  # (a one-row answer reversed is itself)
            assert (await grader.grade(task, f"```sql\n{wrong};\n```")).value == 0.0, (task.id, wrong)
