"""``intercode:sql``: InterCode's SQL tasks (23 requests over Spider databases), ported from the MySQL
server InterCode runs in Docker to sqlite, from the data files of the ``intercode-bench`` wheel.

The wheel's MySQL dump (``spider_dev.sql``: 20 databases) is converted here to sqlite (backticks,
column collations, index-only ``KEY`` lines, key prefix lengths and MySQL string escapes are the
differences that matter) and loaded into an in-memory sqlite database, whose ``iterdump`` is the
task's ``db.sql``: the sandbox's ``sql`` mode reads it before the candidate's query. The expected
output is the gold query's result on that database, as the ``sqlite3`` shell prints it (``|``
between columns, empty for NULL, reals to 15 significant digits). A gold query without ``ORDER
BY`` is compared as a multiset of rows (a checker), one with it in order. Running the trusted gold
queries here, on the host, is reading the dataset; candidates' queries run only in the sandbox.
Against InterCode's own reward (``SqlEnv.get_reward``, ``tests/tasks/test_intercode_parity.py``)
dojo's verdict differs only where the gold has no ORDER BY and the rows come in another order
(InterCode scores the order its MySQL happened to give): docs/tasks/sql.md.
"""

from __future__ import annotations

import csv
import functools
import io
import random
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

from dojo.tasks.model import Task, TaskMetadata, TestCase, Workspace
from dojo.tasks.wheel_data import wheel_data

DISTRIBUTION = "intercode-bench"
VERSION = "0.1.22"

# The special judge of an unordered result: the same rows, in any order.
UNORDERED_CHECKER = """
rows = lambda name: sorted(line.rstrip() for line in open(name).read().strip().splitlines())
raise SystemExit(0 if rows("output.txt") == rows("expected.txt") else 1)
"""


def _statements(dump: str) -> Iterator[tuple[str, str]]:
    """(database, statement) for each CREATE TABLE and INSERT of a mysqldump file."""
    db, buf = "", list[str]()
    for line in dump.splitlines():
        s = line.strip()
        if not buf:
            use = re.match(r"USE `([^`]+)`;", s)
            if use:
                db = use.group(1)
                continue
            if not s.startswith(("CREATE TABLE", "INSERT INTO")):
                continue
        buf.append(line)
        if s.endswith(";"):
            yield db, "\n".join(buf)
            buf = []


def _create_table(stmt: str) -> str:
    lines = stmt.splitlines()
    columns = []
    for line in lines[1:-1]:
        s = line.strip().rstrip(",")
        if re.match(r"(UNIQUE |FULLTEXT )?KEY ", s):
            continue  # an index, not a constraint
        s = re.sub(r" COLLATE \w+| CHARACTER SET \w+| AUTO_INCREMENT| unsigned", "", s)
        s = re.sub(r"(`[^`]+`)\(\d+\)", r"\1", s)  # a key's prefix length
        columns.append("  " + s)
    return lines[0] + "\n" + ",\n".join(columns) + "\n);"


def _insert(stmt: str) -> str:
    """MySQL's string escapes (``\\'``, ``\\n``, ...) as standard SQL's (``''``)."""
    out: list[str] = []
    i, n = 0, len(stmt)
    while i < n:
        if stmt[i] != "'":
            out.append(stmt[i])
            i += 1
            continue
        j, value = i + 1, []
        while True:
            c = stmt[j]
            if c == "\\":
                value.append({"n": "\n", "t": "\t", "0": "\0", "r": "\r"}.get(stmt[j + 1], stmt[j + 1]))
                j += 2
            elif c == "'" and j + 1 < n and stmt[j + 1] == "'":
                value.append("'")
                j += 2
            elif c == "'":
                break
            else:
                value.append(c)
                j += 1
        out.append("'" + "".join(value).replace("'", "''") + "'")
        i = j + 1
    return "".join(out)


@functools.cache
def databases() -> dict[str, sqlite3.Connection]:
    """The dump's databases, in memory (read only by this module)."""
    dump = (
        wheel_data(DISTRIBUTION, VERSION, "intercode/assets", "intercode") / "datasets" / "spider_dev.sql"
    ).read_text()
    out: dict[str, sqlite3.Connection] = {}
    for db, stmt in _statements(dump):
        conn = out.setdefault(db, sqlite3.connect(":memory:", check_same_thread=False))
        sql = _create_table(stmt) if stmt.lstrip().startswith("CREATE") else _insert(stmt)
        conn.executescript(sql.replace("`", '"'))
    return out


@functools.cache
def database_text(db: str) -> str:
    return "\n".join(databases()[db].iterdump()) + "\n"


@functools.cache
def schema_text(db: str) -> str:
    """The database's CREATE TABLE statements, as a prompt shows them."""
    rows = databases()[db].execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
    return "\n".join(f"{sql};" for (sql,) in rows)


def cli_value(value: Any) -> str:
    """A value as the sqlite3 shell prints it in list mode."""
    if value is None:
        return ""
    if isinstance(value, float):
        text = f"{value:.15g}"
        if "e" in text and "." not in text.split("e")[0]:
            mantissa, exponent = text.split("e")
            return f"{mantissa}.0e{exponent}"
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def gold_output(db: str, query: str) -> str:
    rows = databases()[db].execute(query).fetchall()
    return "".join("|".join(cli_value(v) for v in row) + "\n" for row in rows)


def load_intercode_sql(*, n: int | None = None, seed: int = 0) -> list[Task]:
    root = wheel_data(DISTRIBUTION, VERSION, "intercode/assets", "intercode")
    rows = list(csv.DictReader(io.StringIO((root / "datasets" / "sql_queries.csv").read_text())))
    indexed = list(enumerate(rows))
    if n is not None:
        indexed = random.Random(seed).sample(indexed, min(n, len(indexed)))
    tasks = []
    for i, row in indexed:
        db, gold = row["db"], row["gold"].strip()
        prompt = (
            f"A sqlite database `{db}` has these tables:\n{schema_text(db)}\n\n{row['query'].strip()}\n\n"
            "Answer with one SQL query in a ```sql block; its result is compared with the expected rows."
        )
        ordered = re.search(r"\border\s+by\b", gold, re.IGNORECASE) is not None
        tasks.append(
            Task(
                id=f"intercode:sql/{i}",
                domain="data",
                form="stdio",
                language="sql",
                prompt=prompt,
                tests=[TestCase(expected=gold_output(db, gold))],
                checker=None if ordered else UNORDERED_CHECKER,
                reference=f"```sql\n{gold};\n```",
                workspace=Workspace(files={"db.sql": database_text(db)}, editable=[], protected=["db.sql"]),
                metadata=TaskMetadata(source="intercode:sql", tags=["intercode", db]),
            )
        )
    return tasks
