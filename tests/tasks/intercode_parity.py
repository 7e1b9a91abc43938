"""dojo's verdicts on InterCode's tasks next to InterCode's own reward functions, on candidates made
from each task's gold (never by a model), every candidate run in dojo's sandbox as dojo grades it.

InterCode's rewards are ``SqlEnv.get_reward`` and ``BashEnv.get_reward``, imported from the
``intercode-bench`` wheel's files and called on an object that supplies what they read, in place of
the Docker containers and the MySQL server they were written for:

- SQL: ``self.cur`` is a cursor on the same sqlite database dojo grades against (InterCode runs the
  gold on it, as dojo does when it loads the task); ``self.observation`` is the agent's rows, from
  the candidate run in the sandbox on the task's ``db.sql`` (one run per task for all its candidates,
  the values' types kept), or InterCode's error text when the query fails.
- bash: the agent's and the gold's containers are the two final states dojo's grader read (a sandbox
  that records each run's report is handed to dojo's ``Grader``), answering the commands
  ``get_reward`` sends them: ``git status --short`` (written from the state as git writes it: git
  tracks files, not directories, and of a file's mode only the owner's execute bit; a new directory
  with files is one ``?? dir/`` line), ``md5sum PATH`` (the file's digest; an archive by its members,
  as InterCode's containers, built from one image, give the same archive command the same bytes),
  ``md5deep -r PATH`` (not in InterCode's image, alpine with git: the same error in both containers)
  and the gold command (its output). The agent's observation is what the candidate printed, stdout
  and stderr (Docker's ``exec_run`` gives both), each run's uid named as dojo names it (InterCode's
  containers both run as root). The candidate is one action: InterCode's experiments run one action
  a turn and submit, and count a task solved when the reward is 1 (``if reward == 1: break`` in its
  ``experiments/eval_n_turn.py``); that is the success compared here.

InterCode's modules import packages this venv lacks (``gymnasium``, ``mysql.connector``,
``sklearn``): stand-ins are put in ``sys.modules`` while the wheel's modules import, then taken out.
``sklearn``'s ``TfidfVectorizer`` (the bash reward's output similarity) is not installed here; its
default behaviour is ported below (``TfidfVectorizer``) and checked against scikit-learn's numbers in
``tests/tasks/test_intercode_parity.py``. Used by that test.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import math
import re
import sys
import types
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import scipy.sparse  # type: ignore[import-untyped]

from dojo.rewards.extract import extract_code
from dojo.rewards.shell import same_state
from dojo.sandbox import ExecutionResult, InputFile, Limits, Program, SandboxAPI
from dojo.tasks.intercode_sql import database_text, databases
from dojo.tasks.model import Task

# --- InterCode's reward functions, from the wheel's files ------------------------------------------


class TfidfVectorizer:
    """scikit-learn's ``TfidfVectorizer()`` as ``BashEnv.get_reward`` uses it (its defaults: words of
    two or more word characters, lowercased; raw counts times ``ln((1 + n) / (1 + df)) + 1``; each row
    scaled to unit length), returning a ``scipy.sparse.csr_matrix`` as scikit-learn does (so
    ``tfidf * tfidf.T`` is the matrix product). ValueError on an empty vocabulary, as scikit-learn."""

    TOKEN = re.compile(r"(?u)\b\w\w+\b")

    def fit_transform(self, raw_documents: Sequence[str]) -> scipy.sparse.csr_matrix:
        counts = [collections.Counter(self.TOKEN.findall(doc.lower())) for doc in raw_documents]
        vocabulary = sorted(set().union(*counts))
        if not vocabulary:
            raise ValueError("empty vocabulary; perhaps the documents only contain stop words")
        n = len(raw_documents)
        df = collections.Counter(term for c in counts for term in c)
        idf = {t: math.log((1 + n) / (1 + df[t])) + 1.0 for t in vocabulary}
        rows = []
        for c in counts:
            row = [c[t] * idf[t] for t in vocabulary]
            norm = math.sqrt(sum(v * v for v in row))
            rows.append([v / norm for v in row] if norm else row)
        return scipy.sparse.csr_matrix(rows)


def _stand_ins() -> dict[str, types.ModuleType]:
    """Modules InterCode's env modules import that this venv lacks, each with what those modules
    read from it (nothing of them runs in a reward but the error classes and ``TfidfVectorizer``)."""
    out: dict[str, types.ModuleType] = {}
    if importlib.util.find_spec("gymnasium") is None:
        gym = types.ModuleType("gymnasium")
        gym.Env = type("Env", (), {})  # type: ignore[attr-defined]
        out["gymnasium"] = gym
    if importlib.util.find_spec("mysql") is None:
        mysql, connector, errors = (types.ModuleType(n) for n in ("mysql", "mysql.connector", "mysql.connector.errors"))
        errors.ProgrammingError = type("ProgrammingError", (Exception,), {})  # type: ignore[attr-defined]
        errors.DatabaseError = type("DatabaseError", (Exception,), {})  # type: ignore[attr-defined]
        connector.errors = errors  # type: ignore[attr-defined]
        mysql.connector = connector  # type: ignore[attr-defined]
        out.update({"mysql": mysql, "mysql.connector": connector, "mysql.connector.errors": errors})
    if importlib.util.find_spec("sklearn") is None:
        names = ("sklearn", "sklearn.feature_extraction", "sklearn.feature_extraction.text")
        sklearn, extraction, text = (types.ModuleType(n) for n in names)
        text.TfidfVectorizer = TfidfVectorizer  # type: ignore[attr-defined]
        extraction.text = text  # type: ignore[attr-defined]
        sklearn.feature_extraction = extraction  # type: ignore[attr-defined]
        out.update(dict(zip(names, (sklearn, extraction, text), strict=True)))
    return out


@dataclass(frozen=True)
class InterCodeEnvs:
    SqlEnv: Any
    BashEnv: Any
    GIT_RESET_SCRIPT: str
    GIT_STATUS_SCRIPT: str
    uses_port: bool  # sklearn is absent: the bash reward's TfidfVectorizer is the port above


@functools.cache
def intercode_envs() -> InterCodeEnvs:
    """``SqlEnv`` and ``BashEnv`` from the wheel's files. The stand-ins are in ``sys.modules`` only
    while they import (the modules keep what they bound); InterCode's modules are taken out after."""
    stand_ins = _stand_ins()
    before = set(sys.modules)
    sys.modules.update({k: v for k, v in stand_ins.items() if k not in sys.modules})
    try:
        from intercode.envs.bash import bash_env  # type: ignore[import-untyped]
        from intercode.envs.sql import sql_env  # type: ignore[import-untyped]
    finally:
        for name in set(sys.modules) - before:
            if name in stand_ins or name == "intercode" or name.startswith("intercode."):
                del sys.modules[name]
    return InterCodeEnvs(
        SqlEnv=sql_env.SqlEnv,
        BashEnv=bash_env.BashEnv,
        GIT_RESET_SCRIPT=bash_env.GIT_RESET_SCRIPT,
        GIT_STATUS_SCRIPT=bash_env.GIT_STATUS_SCRIPT,
        uses_port="sklearn" in stand_ins,
    )


def _quiet() -> logging.Logger:
    logger = logging.getLogger("tests.intercode_parity")
    logger.disabled = True
    return logger


# --- SQL ---------------------------------------------------------------------------------------------

Rows = list[tuple[Any, ...]]

# Runs each candidate query on a fresh copy of the task's database, in the sandbox, and prints its
# rows with their types kept (JSON keeps ints and floats apart; bytes are tagged), or its error.
ROWS_PROGRAM = r"""
import json, sqlite3, sys

db = sqlite3.connect(":memory:")
db.executescript(open("db.sql").read())
db.execute("PRAGMA query_only = 1")
out = []
for query in json.loads(sys.stdin.read()):
    cur = db.cursor()
    try:
        cur.execute(query)
        rows = cur.fetchall() if cur.description is not None else None
    except sqlite3.Error as e:
        out.append({"error": str(e)})
        continue
    out.append({"rows": None if rows is None else [[{"hex": v.hex()} if isinstance(v, bytes) else v for v in row]
                                                   for row in rows]})
print(json.dumps(out))
"""


def rows_program(db: str, queries: Sequence[str]) -> Program:
    return Program(
        language="python",
        source=ROWS_PROGRAM,
        stdin=json.dumps(list(queries)),
        files=[InputFile(path="db.sql", content=database_text(db).encode())],
    )


def observations(stdout: str) -> list[Rows | str | None]:
    """What InterCode's ``SqlEnv.exec_action`` leaves as the observation after each query: its rows
    (a list of tuples), None for a statement without rows, or the error text."""
    out: list[Rows | str | None] = []
    for item in json.loads(stdout):
        if "error" in item:
            out.append(f"Error executing query: {item['error']}")
        elif item["rows"] is None:
            out.append(None)
        else:
            out.append(
                [tuple(bytes.fromhex(v["hex"]) if isinstance(v, dict) else v for v in row) for row in item["rows"]]
            )
    return out


def intercode_sql_reward(db: str, gold: str, observation: Rows | str | None) -> float:
    """``SqlEnv.get_reward``: the gold run on a cursor on the task's database, against the rows."""
    env: Any = object.__new__(intercode_envs().SqlEnv)
    env.cur = databases()[db].cursor()
    env.gold = gold
    env.observation = observation
    env.info = {}
    env.logger = _quiet()
    with warnings.catch_warnings():  # one row in common: scipy warns that tau is NaN (InterCode keeps the IoU)
        warnings.simplefilter("ignore", RuntimeWarning)
        reward, _ = env.get_reward()
    return float(reward)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _flip_order(query: str) -> str:
    """The query with each ORDER BY term's direction reversed."""
    head, clause = re.split(r"\border\s+by\b", query, maxsplit=1, flags=re.IGNORECASE)
    limit = re.search(r"\blimit\b.*$", clause, re.IGNORECASE | re.DOTALL)
    terms_text, tail = (clause[: limit.start()], clause[limit.start() :]) if limit else (clause, "")
    terms = []
    for term in terms_text.split(","):
        t = term.strip()
        if re.search(r"\bdesc$", t, re.IGNORECASE):
            terms.append(t[:-4].rstrip() + " ASC")
        elif re.search(r"\basc$", t, re.IGNORECASE):
            terms.append(t[:-3].rstrip() + " DESC")
        else:
            terms.append(t + " DESC")
    return f"{head}ORDER BY {', '.join(terms)} {tail}".rstrip()


def _changed_literal(query: str) -> str | None:
    """The query with its first literal changed (a string gets ``zq`` appended, a number + 1)."""
    s = re.search(r"'[^']*'|\"[^\"]*\"", query)
    if s:
        return query[: s.end() - 1] + "zq" + query[s.end() - 1 :]
    n = re.search(r"(?<=[<>=]) *(\d+)\b", query)
    if n:
        return query[: n.start(1)] + str(int(n.group(1)) + 1) + query[n.end(1) :]
    return None


def sql_candidates(gold: str, columns: Sequence[str], rows: int) -> list[tuple[str, str]]:
    """(kind, query) made from the gold: the gold; its first literal changed; its last column left
    out (when it has two or more); a column too many; its rows in another order (its ORDER BY
    reversed, or ``ORDER BY 1 DESC`` where it has none); its LIMIT changed (one more, or one row
    fewer than it returns where it has none); no rows."""
    g = gold.strip().rstrip(";").strip()
    names = [_ident(c) for c in columns]
    out = [("gold", g)]
    if (literal := _changed_literal(g)) is not None:
        out.append(("changed_literal", literal))
    if len(names) > 1:
        out.append(("column_left_out", f"SELECT {', '.join(names[:-1])} FROM ({g})"))
    out.append(("column_extra", f"SELECT *, {names[0]} FROM ({g})"))
    ordered = re.search(r"\border\s+by\b", g, re.IGNORECASE) is not None
    out.append(("reordered", _flip_order(g) if ordered else f"SELECT * FROM ({g}) ORDER BY 1 DESC"))
    limit = re.search(r"\blimit\s+(\d+)\s*$", g, re.IGNORECASE)
    if limit:
        out.append(("limit_changed", g[: limit.start(1)] + str(int(limit.group(1)) + 1)))
    else:
        out.append(("limit_changed", f"{g} LIMIT {max(1, rows - 1)}"))
    out.append(("empty", f"SELECT * FROM ({g}) WHERE 0"))
    return out


def sql_rule(ordered: bool, dojo: bool, intercode: float, gold_rows: Rows, observation: Any) -> str:
    """The documented rule that makes dojo's verdict differ from InterCode's success, checked on
    the rows themselves, or ``"unexplained"``."""
    if not isinstance(observation, list):
        return "unexplained"
    mine, theirs = [str(r) for r in observation], [str(r) for r in gold_rows]
    if dojo and intercode != 1 and not ordered and collections.Counter(mine) == collections.Counter(theirs):
        return "order_without_order_by"  # InterCode scores the row order a query without ORDER BY leaves
    return "unexplained"


# --- bash --------------------------------------------------------------------------------------------


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _git_path(path: str) -> str:
    """A path as ``git status --short`` writes it: quoted when it holds a space, a quote, a
    backslash or a byte outside printable ASCII (``core.quotePath``)."""
    if not any(c in ' "\\' or not 32 <= ord(c) < 127 for c in path):
        return path
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\n", "\\n")
    return f'"{escaped}"'


def git_status(task: Task, report: dict[str, Any]) -> str:
    """``git status --short`` in the state ``report`` describes, the task's tree committed (as
    InterCode's image commits its testbed): tracked files deleted (`` D``), changed in content or
    in the owner's execute bit (`` M``), made links (`` T``); untracked files and links (``??``), a
    directory holding no tracked file as one ``dir/`` line. Directories alone are not listed."""
    assert task.workspace is not None
    executable = set(task.workspace.executable)
    tracked = {p: (_sha(text), p in executable) for p, text in task.workspace.files.items()}
    tracked_dirs = {"/".join(p.split("/")[:i]) for p in tracked for i in range(1, p.count("/") + 1)}
    tree: dict[str, dict[str, Any]] = report["tree"]
    lines: set[str] = set()
    for path, (digest, x) in tracked.items():
        entry = tree.get(path)
        if entry is None or entry["type"] not in ("file", "link"):
            lines.add(f" D {_git_path(path)}")
        elif entry["type"] == "link":
            lines.add(f" T {_git_path(path)}")
        elif entry.get("sha256") != digest or bool(entry["mode"] & 0o100) != x:
            lines.add(f" M {_git_path(path)}")
    for path, entry in tree.items():
        if path in tracked or entry["type"] not in ("file", "link"):
            continue
        parts = path.split("/")
        top = next((i for i in range(1, len(parts)) if "/".join(parts[:i]) not in tracked_dirs), None)
        lines.add("?? " + (_git_path("/".join(parts[:top]) + "/") if top else _git_path(path)))
    return "".join(line + "\n" for line in sorted(lines, key=lambda s: s[3:]))


def _entry(report: dict[str, Any], path: str) -> dict[str, Any] | None:
    entry: dict[str, Any] | None = report["tree"].get(path.rstrip("/"))
    return entry


class ExecResult(NamedTuple):
    """docker's ``ExecResult``."""

    exit_code: int
    output: bytes


@dataclass
class Container:
    """One of InterCode's containers, in the final state ``report`` describes."""

    task: Task
    report: dict[str, Any]
    outputs: dict[str, str] = field(default_factory=dict)  # a command's output (the gold's)
    seen: list[str] = field(default_factory=list)

    def exec_run(self, cmd: str, workdir: str | None = None) -> ExecResult:
        self.seen.append(cmd)
        envs = intercode_envs()
        if cmd.endswith(f'"{envs.GIT_RESET_SCRIPT}"'):
            return ExecResult(0, b"")
        if cmd.endswith(f'"{envs.GIT_STATUS_SCRIPT}"'):
            return ExecResult(0, git_status(self.task, self.report).encode())
        if cmd in self.outputs:
            return ExecResult(0, self.outputs[cmd].encode())
        if cmd.startswith("md5deep "):  # alpine has no md5deep: Docker's error, the same in both containers
            return ExecResult(126, b'OCI runtime exec failed: exec: "md5deep": executable file not found in $PATH\n')
        if cmd.startswith("md5sum "):
            path = cmd.removeprefix("md5sum ")
            entry = _entry(self.report, path)
            if entry is None:
                return ExecResult(1, f"md5sum: can't open '{path}': No such file or directory\n".encode())
            if entry["type"] == "dir":
                return ExecResult(1, f"md5sum: can't read '{path}': Is a directory\n".encode())
            digest = json.dumps(entry["members"]) if "members" in entry else entry.get("sha256", "")
            return ExecResult(0, f"{digest}  {path}\n".encode())
        raise AssertionError(f"InterCode's reward ran a command this stand-in does not know: {cmd!r}")


def observation(report: dict[str, Any]) -> str:
    """What InterCode's agent sees of a command: its output, stdout and stderr, the run's uid named as
    dojo's ``same_state`` names it."""
    text = str(report.get("stdout", "")) + str(report.get("stderr", ""))
    uid = report.get("uid")
    return re.sub(rf"\b{uid}\b", "user", text) if isinstance(uid, int) else text


@dataclass(frozen=True)
class BashReward:
    reward: float
    info: dict[str, Any]


def intercode_bash_reward(task: Task, agent: dict[str, Any], gold: dict[str, Any]) -> BashReward:
    """``BashEnv.get_reward`` on the agent's and the gold's final states."""
    envs = intercode_envs()
    env: Any = object.__new__(envs.BashEnv)
    env.image_name = "intercode-bash"
    env.ctr_name_eval = "intercode-bash_ic_ctr_eval"
    env.logger = _quiet()
    env.info = {}
    env.gold = extract_code(task.reference or "", "bash")
    env.observation = observation(agent)
    env.container = Container(task, agent)
    env.container_eval = Container(task, gold, {env.clean_cmd(env.gold): observation(gold)})
    reward, info = env.get_reward()
    assert env.clean_cmd(env.gold) in env.container_eval.seen  # the gold's output was asked for
    return BashReward(float(reward), info)


def bash_candidates(task: Task, gold_report: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, script) made from the gold: the gold; the gold and a change it does not make (a new
    file, a line added to a file it leaves alone, an empty directory, a file's mode made 600); the
    gold with a wrong change to each file it changes; the gold and an extra line of output; its
    output lines in another order; another command (``ls -R testbed``); nothing (``true``)."""
    gold = extract_code(task.reference or "", "bash")
    assert task.workspace is not None
    changed = [p for p in sorted(gold_report["tree"]) if gold_report["tree"][p]["type"] == "file"
               and task.workspace.files.get(p) is not None
               and gold_report["tree"][p].get("sha256") != _sha(task.workspace.files[p])]  # fmt: skip
    made = [p for p in sorted(gold_report["tree"]) if gold_report["tree"][p]["type"] == "file"
            and p not in task.workspace.files and "members" not in gold_report["tree"][p]]  # fmt: skip
    untouched = next(p for p in sorted(task.workspace.files) if p not in changed and p in gold_report["tree"])
    out = [
        ("gold", gold),
        ("extra_new_file", f"{gold}\necho zq > testbed/zq_extra.txt"),
        ("extra_line_in_file", f"{gold}\necho zq >> {untouched}"),
        ("extra_empty_dir", f"{gold}\nmkdir testbed/zq_dir"),
        ("extra_mode_600", f"{gold}\nchmod 600 {untouched}"),
    ]
    out += [(f"wrong_change:{p}", f"{gold}\necho zq >> {p}") for p in [*changed, *made]]
    out += [
        ("extra_output_line", f"{gold}\necho zq extra line"),
        ("output_reordered", f"{{\n{gold}\n}} | sort -r"),
        ("other_command", "ls -R testbed"),
        ("nothing", "true"),
    ]
    return out


def state_differences(task: Task, agent: dict[str, Any], gold: dict[str, Any]) -> set[str]:
    """How two final states differ, in the terms of InterCode's blind spots: ``output`` (dojo's
    comparison of what was printed fails), ``stderr`` (what went to stderr differs), ``dir`` (a
    directory made or removed), ``mode`` (a file's mode bit other than the owner's execute bit),
    ``tracked_contents`` (a tracked file's contents, where git lists it as modified in both),
    ``other`` (anything else)."""
    out: set[str] = set()
    if not same_state({**agent, "tree": {}}, {**gold, "tree": {}})[0]:
        out.add("output")
    if observation({**agent, "stdout": ""}).strip() != observation({**gold, "stdout": ""}).strip():
        out.add("stderr")
    modified = [{line[3:] for line in git_status(task, r).splitlines() if line.startswith(" M")} for r in (agent, gold)]
    for path in sorted(set(agent["tree"]) | set(gold["tree"])):
        a, g = agent["tree"].get(path), gold["tree"].get(path)
        if a is not None and g is not None and _same_entry(a, g):
            continue
        if (a is None or a["type"] == "dir") and (g is None or g["type"] == "dir"):
            out.add("dir")
        elif a and g and a["type"] == g["type"] == "file" and _same_entry({**a, "mode": g["mode"]}, g):
            out.add("mode" if (a["mode"] ^ g["mode"]) & 0o100 == 0 else "other")
        elif a and g and a["type"] == g["type"] == "file" and path in modified[0] & modified[1]:
            out.add("tracked_contents")
        else:
            out.add("other")
    return out


def _same_entry(a: dict[str, Any], g: dict[str, Any]) -> bool:
    """As ``same_state`` compares tree entries (an archive by its members)."""
    keys = ("type", "mode", "members", "target") if "members" in a or "members" in g else ("type", "mode", "sha256")
    return all(a.get(k) == g.get(k) for k in keys)


# The rules by which InterCode's bash reward passes what dojo refuses: what of a state it cannot see.
BLIND_SPOTS = {
    "dir": "directories_invisible",  # git tracks files: a directory made or removed is no change
    "mode": "mode_bits_invisible",  # git keeps only the owner's execute bit of a file's mode
    "tracked_contents": "modified_contents_not_compared",  # only new files' contents are hashed
    "output": "output_by_similarity",  # outputs compared by TF-IDF cosine: 0.985 rounds to the full 0.33
}


def bash_rule(dojo: bool, intercode: BashReward, differences: set[str]) -> str:
    """The documented rule (rules joined by ``+``) that makes dojo's verdict differ from InterCode's
    success, from how the two states differ, or ``"unexplained"``."""
    seen = differences - {"stderr"}  # dojo compares stdout; a difference there alone is InterCode's
    if intercode.reward == 1 and not dojo and seen and not seen - set(BLIND_SPOTS):
        return "+".join(BLIND_SPOTS[d] for d in sorted(seen))
    if dojo and intercode.reward != 1 and differences == {"stderr"}:
        return "stderr_not_compared"  # InterCode's observation is stdout and stderr together
    return "unexplained"


# --- a sandbox that keeps what dojo's grader's shell runs reported ------------------------------------


class RecordingSandbox:
    """``inner``, keeping each shell run's report (by the script it ran) for InterCode's reward:
    the states InterCode compares are the very ones dojo's grader compared. Everything else is
    ``inner``'s (``as_api`` hands it to ``Grader``)."""

    def __init__(self, inner: SandboxAPI) -> None:
        self.inner = inner
        self.reports: dict[str, dict[str, Any]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def run(self, program: Program, limits: Limits | None = None, **kw: Any) -> ExecutionResult:
        result = await self.inner.run(program, limits, **kw)
        if kw.get("harness"):
            with contextlib.suppress(ValueError):
                self.reports[json.loads(program.stdin)["script"]] = json.loads(result.stdout)
        return result

    @property
    def as_api(self) -> SandboxAPI:
        return cast(SandboxAPI, self)


def tally(rows: Iterable[tuple[str, bool, bool, str]]) -> dict[str, Any]:
    """Per kind: candidates, dojo passes, InterCode successes; and the differences by rule."""
    kinds: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0, 0])
    rules: collections.Counter[str] = collections.Counter()
    for kind, dojo, intercode, rule in rows:
        k = kinds[kind.split(":")[0]]
        k[0], k[1], k[2] = k[0] + 1, k[1] + dojo, k[2] + intercode
        if dojo != intercode:
            rules[rule] += 1
    return {"kinds": dict(kinds), "rules": dict(rules)}
