"""``family:sql``: questions about real databases, answered with one SQL query, without a ceiling on
their number.

The databases are the 19 non-empty Spider databases that InterCode's wheel ships
(``dojo.tasks.intercode_sql`` ports them to sqlite). A question is made from the data itself, by
level: one table (a count under a condition, the distinct values of a column under a condition),
aggregates (counts per group, a numeric column's minimum, maximum and mean, a count above a
threshold), then a join along a foreign key (rows of one table whose referenced row meets a
condition, counts per referenced value). The generator writes the gold query, runs it here on the
host's sqlite (trusted data and a trusted query: reading the dataset), and keeps a question only
when its answer discriminates: a count of at least ``MIN_COUNT`` (a constant does not guess it),
at least two rows listed. The expected
output is what the sandbox's ``sqlite3`` prints for the gold; the candidate's query runs only in
the sandbox, on the task's ``db.sql``.
"""

from __future__ import annotations

import functools
import random
import sqlite3
from dataclasses import dataclass
from typing import Any

from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.intercode_sql import database_text, databases, gold_output, schema_text
from dojo.tasks.model import Task, TaskMetadata, TestCase, Workspace

# A count is asked only when it is at least this: small counts are what a constant query guesses
# (with 2, "SELECT 2;" passed 10% of the tasks); listing rows needs the data whatever their number.
MIN_COUNT = 10


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    numeric: tuple[str, ...]  # columns whose every non-null value is a number
    rows: int
    foreign_keys: tuple[tuple[str, str, str], ...]  # (column, referenced table, referenced column)


@functools.cache
def tables() -> dict[str, dict[str, Table]]:
    """The non-empty tables of each database, with their columns and foreign keys."""
    out: dict[str, dict[str, Table]] = {}
    for db, conn in databases().items():
        found: dict[str, Table] = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
            rows = conn.execute(f"SELECT count(*) FROM {q(name)}").fetchone()[0]
            if rows == 0:
                continue
            columns = tuple(r[1] for r in conn.execute(f"PRAGMA table_info({q(name)})"))
            numeric = tuple(c for c in columns if _numeric(conn, name, c))
            fks = tuple((r[3], r[2], r[4]) for r in conn.execute(f"PRAGMA foreign_key_list({q(name)})") if r[4])
            found[name] = Table(name, columns, numeric, rows, fks)
        if found:
            out[db] = found
    return out


def q(name: str) -> str:
    """A quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """A value as an SQL literal."""
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _numeric(conn: sqlite3.Connection, table: str, column: str) -> bool:
    kinds = {r[0] for r in conn.execute(f"SELECT DISTINCT typeof({q(column)}) FROM {q(table)}")} - {"null"}
    return bool(kinds) and kinds <= {"integer", "real"}


def _values(db: str, table: str, column: str) -> list[Any]:
    sql = f"SELECT DISTINCT {q(column)} FROM {q(table)} WHERE {q(column)} IS NOT NULL ORDER BY 1"
    return [r[0] for r in databases()[db].execute(sql)]


def _rows(db: str, sql: str) -> list[tuple[Any, ...]]:
    return databases()[db].execute(sql).fetchall()


def _count(db: str, sql: str) -> int:
    return int(_rows(db, sql)[0][0] or 0)


def _one_table(rng: random.Random, db: str, t: Table) -> tuple[str, str] | None:
    """(question, gold) over one table: a count under a condition, or distinct values under one."""
    column = rng.choice(t.columns)
    values = _values(db, t.name, column)
    if not values:
        return None
    value = rng.choice(values)
    where = f"{q(column)} = {literal(value)}"
    if rng.random() < 0.5 or len(t.columns) < 2:
        gold = f"SELECT count(*) FROM {q(t.name)} WHERE {where}"
        if _count(db, gold) >= MIN_COUNT:
            return f"How many rows of `{t.name}` have `{column}` equal to {literal(value)}?", gold
        if len(t.columns) < 2:
            return None
    other = rng.choice([c for c in t.columns if c != column])
    gold = f"SELECT DISTINCT {q(other)} FROM {q(t.name)} WHERE {where} AND {q(other)} IS NOT NULL ORDER BY 1"
    if len(_rows(db, gold)) < 2:  # one value is as guessable as a count
        return None
    question = (
        f"List the distinct values of `{other}` (leaving out NULL) in the rows of `{t.name}` whose "
        f"`{column}` is {literal(value)}, in ascending order."
    )
    return question, gold


def _aggregate(rng: random.Random, db: str, t: Table) -> tuple[str, str] | None:
    """(question, gold) with aggregates: counts per group, a numeric column's range and mean, or a
    count above a threshold."""
    kind = rng.choice(["group", "range", "above"] if t.numeric else ["group"])
    if kind == "group":
        column = rng.choice(t.columns)
        if not 2 <= len(_values(db, t.name, column)) < t.rows:  # every row its own group says nothing
            return None
        gold = (
            f"SELECT {q(column)}, count(*) FROM {q(t.name)} WHERE {q(column)} IS NOT NULL "
            f"GROUP BY {q(column)} ORDER BY {q(column)}"
        )
        question = (
            f"For each distinct non-NULL value of `{column}` in `{t.name}`, give the value and the number "
            f"of rows that have it, ordered by the value."
        )
        return question, gold
    column = rng.choice(t.numeric)
    values = _values(db, t.name, column)
    if len(values) < 3:
        return None
    if kind == "range":
        gold = f"SELECT min({q(column)}), max({q(column)}), avg({q(column)}) FROM {q(t.name)}"
        return f"What are the smallest, the largest and the mean `{column}` in `{t.name}` (in that order)?", gold
    threshold = values[rng.randrange(len(values) // 3, len(values) - 1)]
    gold = f"SELECT count(*) FROM {q(t.name)} WHERE {q(column)} > {literal(threshold)}"
    if _count(db, gold) < MIN_COUNT:
        return None
    return f"How many rows of `{t.name}` have `{column}` greater than {literal(threshold)}?", gold


def _join(rng: random.Random, db: str, schema: dict[str, Table]) -> tuple[str, str] | None:
    """(question, gold) along a foreign key: rows whose referenced row meets a condition, or the
    count of referring rows per value of a referenced column."""
    links = [(t, fk) for t in schema.values() for fk in t.foreign_keys if fk[1] in schema]
    if not links:
        return None
    t, (column, ref_name, ref_column) = rng.choice(links)
    ref = schema[ref_name]
    on = f"{q(t.name)}.{q(column)} = {q(ref.name)}.{q(ref_column)}"
    attribute = rng.choice([c for c in ref.columns if c != ref_column] or [ref_column])
    via = f"(`{t.name}`.`{column}` refers to `{ref.name}`.`{ref_column}`)"
    if rng.random() < 0.5:
        values = _values(db, ref.name, attribute)
        if not values:
            return None
        value = rng.choice(values)
        gold = (
            f"SELECT count(*) FROM {q(t.name)} JOIN {q(ref.name)} ON {on} "
            f"WHERE {q(ref.name)}.{q(attribute)} = {literal(value)}"
        )
        if _count(db, gold) < MIN_COUNT:
            return None
        question = (
            f"How many rows of `{t.name}` refer to a row of `{ref.name}` whose `{attribute}` is {literal(value)}? {via}"
        )
        return question, gold
    gold = (
        f"SELECT {q(ref.name)}.{q(attribute)}, count(*) FROM {q(t.name)} JOIN {q(ref.name)} ON {on} "
        f"WHERE {q(ref.name)}.{q(attribute)} IS NOT NULL GROUP BY {q(ref.name)}.{q(attribute)} ORDER BY 1"
    )
    if len(_rows(db, gold)) < 2:
        return None
    question = (
        f"For each distinct non-NULL `{attribute}` of `{ref.name}`, how many rows of `{t.name}` refer to a "
        f"row of `{ref.name}` with that value? Give the value and the count, ordered by the value. {via}"
    )
    return question, gold


LEVELS = ("one table", "aggregates", "a join")


class SqlFamily:
    """See the module doc."""

    name = "sql"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, len(LEVELS))
        schemas = tables()
        for _ in range(200):  # a draw whose answer does not discriminate is drawn again
            db = rng.choice(sorted(schemas))
            schema = schemas[db]
            table = schema[rng.choice(sorted(schema))]
            made = (_one_table(rng, db, table), _aggregate(rng, db, table), _join(rng, db, schema))[level]
            if made is None:
                continue
            question, gold = made
            expected = gold_output(db, gold)
            if not expected.strip():
                continue
            return _task(db, question, gold, expected, level, difficulty)
        raise RuntimeError(f"family:sql drew no question at level {level} in 200 tries")  # pragma: no cover


def _task(db: str, question: str, gold: str, expected: str, level: int, difficulty: float) -> Task:
    prompt = (
        f"A sqlite database `{db}` has these tables:\n{schema_text(db)}\n\n{question}\n\n"
        "Answer with one SQL query in a ```sql block; its result is compared with the expected rows "
        "(in order, as sqlite prints them)."
    )
    return Task(
        id=f"sql/{db}",  # (generate_tasks names it)
        domain="data",
        form="stdio",
        language="sql",
        prompt=prompt,
        tests=[TestCase(expected=expected)],
        reference=f"```sql\n{gold};\n```",
        workspace=Workspace(files={"db.sql": database_text(db)}, editable=[], protected=["db.sql"]),
        metadata=TaskMetadata(source="family:sql", difficulty=difficulty, tags=[LEVELS[level], db]),
    )


register_family(SqlFamily())
