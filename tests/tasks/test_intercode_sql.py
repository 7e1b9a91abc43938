"""intercode:sql: InterCode's SQL tasks ported from its MySQL dump to sqlite; the candidate's query
runs in the sandbox on the task's database; rows compared with the gold's (in order only when the
gold orders them)."""

from __future__ import annotations

import pytest

from dojo.rewards import Grader
from dojo.sandbox import AsyncSandbox, Program
from dojo.tasks import load_source
from dojo.tasks.intercode_sql import cli_value, databases, gold_output


def test_the_mysql_dump_becomes_sqlite() -> None:
    dbs = databases()
    assert len(dbs) == 20
    counts = {db: conn.execute("SELECT count(*) FROM sqlite_master WHERE type='table'").fetchone()[0]
              for db, conn in dbs.items()}  # fmt: skip
    assert sum(counts.values()) == 81 and all(counts.values())
    # every table the dump fills has its rows (MySQL's string escapes read)
    empty = [(db, table) for db, conn in dbs.items()
             for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
             if conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0] == 0]  # fmt: skip
    assert {db for db, _ in empty} == {"wta_1"}  # the dump holds no rows for wta_1
    title = "Do They Know It's Christmas"  # escaped as \\' in the dump
    assert dbs["singer"].execute("SELECT count(*) FROM song WHERE Title = ?", (title,)).fetchone() == (1,)


def test_values_print_as_the_sqlite_shell_prints_them() -> None:
    assert [cli_value(v) for v in (None, 3, 2.5, 3.0, 1 / 3, 1e20, "a|b")] == [
        "", "3", "2.5", "3.0", "0.333333333333333", "1.0e+20", "a|b"
    ]  # fmt: skip


async def test_the_shell_prints_what_the_expected_output_says(fast_sandbox: AsyncSandbox) -> None:
    """The expected output is computed here; the sandbox's sqlite3 must print the same."""
    from dojo.sandbox import InputFile

    query = "SELECT 1, 2.5, 3.0, 1.0/3, NULL, 'x', 1e20;"
    db = "CREATE TABLE t(a);\n"
    r = await fast_sandbox.run(
        Program(language="sql", source=query, files=[InputFile(path="db.sql", content=db.encode())])
    )
    conn = databases()["pets_1"]
    assert r.stdout == "".join("|".join(cli_value(v) for v in row) + "\n" for row in conn.execute(query))


async def test_references_pass_and_wrong_queries_fail(fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source("intercode:sql")
    assert len(tasks) == 20 and len(load_source("intercode:sql?all=1")) == 23  # 3 golds return nothing here
    grader = Grader(fast_sandbox)
    for task in tasks:
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
    unordered = next(t for t in tasks if t.checker and t.tests[0].expected.count("\n") > 2)
    lines = unordered.tests[0].expected.strip().splitlines()
    assert lines != sorted(lines, reverse=True)
    gold = (unordered.reference or "").split("\n")[1].rstrip(";")
    reordered = f"```sql\nSELECT * FROM ({gold}) ORDER BY 1 DESC;\n```"
    assert (await grader.grade(unordered, reordered)).value == 1.0  # the same rows in another order
    wrong = f"```sql\nSELECT * FROM ({gold}) LIMIT 1;\n```"
    assert (await grader.grade(unordered, wrong)).value == 0.0
    broken = await grader.grade(unordered, "```sql\nSELECT nope FROM nowhere;\n```")
    assert broken.value == 0.0


def test_a_gold_that_orders_is_compared_in_order() -> None:
    tasks = load_source("intercode:sql")
    ordered = [t for t in tasks if not t.checker]
    assert ordered and all("order by" in (t.reference or "").lower() for t in ordered)
    with pytest.raises(ValueError, match="bash, sql"):
        load_source("intercode:nope")
    assert gold_output("pets_1", "SELECT count(*) FROM Student") == "34\n"
