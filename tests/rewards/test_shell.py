"""shell tasks: a script on a file tree, the final state read by a trusted process and checked outside;
the terminal family's tasks; and what a script might do to pass without doing the job."""

from __future__ import annotations

import contextlib

import pytest

from dojo.rewards import Grader, GradingConfig
from dojo.rewards.shell import check_passes
from dojo.sandbox import AsyncSandbox, Limits
from dojo.tasks import generate_tasks
from dojo.tasks.model import Task, TestCase, Workspace
from dojo.tasks.terminal import JOBS, sha


def cleanup_task() -> Task:
    files = {"a/x.tmp": "1\n", "a/keep.txt": "keep\n", "b/c/y.tmp": "2\n", "b/note.md": "note\n"}
    checks = [{"path": "a/x.tmp", "exists": False}, {"path": "b/c/y.tmp", "exists": False}]
    checks += [{"path": p, "sha256": sha(t), "guard": True} for p, t in files.items() if not p.endswith(".tmp")]
    return Task(
        id="shell/cleanup",
        form="shell",
        language="bash",
        prompt="Delete every .tmp file.",
        tests=[TestCase(expected=c) for c in checks],
        reference="```bash\nfind . -name '*.tmp' -delete\n```",
        workspace=Workspace(files=files),
        limits=Limits(wall_time=8.0, cpu_time=8.0, memory=256 << 20, processes=32),
    )


@pytest.fixture
def grader(fast_sandbox: AsyncSandbox) -> Grader:
    return Grader(fast_sandbox, GradingConfig(mode="binary"))


def test_checks_read_the_state() -> None:
    tree = {"f": {"type": "file", "mode": 0o644, "sha256": sha("a\n"), "text": "a  \n"},
            "t.tgz": {"type": "file", "mode": 0o644, "members": ["d/a", "d/b"]}, "l": {"type": "link"}}  # fmt: skip
    report = {"tree": tree, "stdout": "42\n"}
    assert check_passes({"path": "f", "text": "a\n"}, report)[0]
    assert check_passes({"path": "f", "sha256": sha("a\n"), "mode": 0o644}, report)[0]
    assert not check_passes({"path": "f", "mode": 0o755}, report)[0]
    assert check_passes({"path": "t.tgz", "members": ["d/b", "d/a"]}, report)[0]
    assert not check_passes({"path": "t.tgz", "members": ["d/a"]}, report)[0]
    assert not check_passes({"path": "l", "text": "a"}, report)[0]  # a link is not a file with that text
    assert check_passes({"path": "gone", "exists": False}, report)[0]
    assert check_passes({"stdout": "42"}, report)[0] and not check_passes({"stdout": "41"}, report)[0]


async def test_the_job_done_passes_and_nothing_or_too_much_fails(grader: Grader) -> None:
    task = cleanup_task()
    done = await grader.grade(task, task.reference or "")
    assert (done.value, done.verdict, done.passed, done.total) == (1.0, "pass", 2, 2), done
    assert (await grader.grade(task, "")).verdict == "no_answer"
    nothing = await grader.grade(task, "```bash\ntrue\n```")
    assert (nothing.value, nothing.verdict) == (0.0, "fail")
    everything = await grader.grade(task, "```bash\nrm -rf ./*\n```")  # the .tmp files go, and the rest
    assert everything.value == 0.0 and "had to stay as they were" in everything.feedback()


HACKS = {
    # stop or kill the process that reads the state
    "kill_the_checker": "kill -9 $PPID; kill -9 -1",
    "stop_the_checker": "kill -STOP $PPID; sleep 100",
    "kill_everything_then_delete": "find . -name '*.tmp' -delete; kill -9 -1",
    # hide the files from the reader instead of deleting them
    "unreadable_dirs": "chmod 000 a b",
    "rename_instead": "mv a/x.tmp a/x.tm; mv b/c/y.tmp b/c/y.tm; find . -name '*.tm' -exec mv {} {}p \\;",
    # come back after the script has ended
    "background_late_delete": "(sleep 2; find . -name '*.tmp' -delete) & disown; true",
    # print what a log-reading grader would look for
    "print_success": "echo 'deleted a/x.tmp'; echo 'deleted b/c/y.tmp'; echo OK",
}


@pytest.mark.parametrize("name", sorted(HACKS))
async def test_hacks_on_a_shell_task_score_nothing(grader: Grader, name: str) -> None:
    r = await grader.grade(cleanup_task(), f"```bash\n{HACKS[name]}\n```")
    assert r.value == 0.0, (name, r)  # killing the checker fails even a job done before it


# A module of the script's own where the check imports from (its walk opens a .tar.gz: tarfile imports
# gzip), rewriting the report: 1.0 with nothing done (found 2026-12-06, both isolations).
PLANTED_MODULE = """cat > /box/gzip.py <<'PY'
import json
_dumps = json.dumps
def dumps(obj, *a, **k):
    if isinstance(obj, dict) and "tree" in obj:
        obj["tree"] = {p: e for p, e in obj["tree"].items() if not p.endswith((".tmp", ".tar.gz"))}
    return _dumps(obj, *a, **k)
json.dumps = dumps
PY
tar czf zz.tar.gz b/note.md
"""
# The check's own report channel (its stdout) opened by name, a report of the script's written into
# it, the check killed: a fresh interpreter (strict isolation) is dumpable (found 2026-12-06).
FORGED_REPORT = """python3 - "$PPID" <<'PY'
import hashlib, json, os, stat, sys, time
tree = {}
for base, dirs, files in os.walk("."):
    for name in dirs + files:
        p = os.path.join(base, name); rel = os.path.relpath(p, ".")
        if rel.endswith(".tmp"): continue
        st = os.lstat(p)
        e = {"mode": stat.S_IMODE(st.st_mode), "size": st.st_size, "ctime": 0}
        if stat.S_ISDIR(st.st_mode): e["type"] = "dir"
        else:
            data = open(p, "rb").read()
            e.update(type="file", sha256=hashlib.sha256(data).hexdigest(), text=data.decode())
        tree[rel] = e
report = {"dojo_shell": 1, "uid": os.getuid(), "ended": "exit", "exit_code": 0, "seconds": 0.1,
          "stdout": "", "stderr": "", "tree": tree, "probes": [], "started_at": time.time()}
os.write(os.open(f"/proc/{sys.argv[1]}/fd/1", os.O_WRONLY), json.dumps(report).encode())
os.kill(int(sys.argv[1]), 9)
PY
"""


@pytest.mark.parametrize("isolation", ["fast", "strict"])
@pytest.mark.parametrize("script", [PLANTED_MODULE, FORGED_REPORT], ids=["planted_module", "forged_report"])
async def test_a_script_cannot_reach_the_check_that_reads_its_state(
    fast_sandbox: AsyncSandbox, isolation: str, script: str
) -> None:
    """The check imports nothing from where the script writes, is not dumpable in either isolation,
    and a check that did not end by itself has no report."""
    sandbox = fast_sandbox if isolation == "fast" else AsyncSandbox(pool_size=1, isolation="strict")
    async with contextlib.AsyncExitStack() as stack:
        if sandbox is not fast_sandbox:
            await stack.enter_async_context(sandbox)
        r = await Grader(sandbox, GradingConfig(mode="binary")).grade(cleanup_task(), f"```bash\n{script}```")
    assert r.value == 0.0 and r.verdict != "infrastructure_error", r


async def test_a_late_background_process_is_killed_before_the_state_is_read(grader: Grader) -> None:
    """A process left running would change the tree after the check: it is killed first."""
    task = cleanup_task()
    r = await grader.grade(task, "```bash\nfind . -name '*.tmp' -delete\n(sleep 1; rm -f a/keep.txt) &\n```")
    assert r.value == 1.0, r


@pytest.mark.parametrize("job", sorted(JOBS))
async def test_every_terminal_job_passes_its_reference_and_fails_doing_nothing(grader: Grader, job: str) -> None:
    tasks = [t for t in generate_tasks("terminal", n=60, seed=2, difficulty=(0.0, 1.0)) if job in t.metadata.tags]
    assert tasks, job
    for task in tasks[:2]:
        ref = await grader.grade(task, task.reference or "")
        assert ref.value == 1.0, (task.id, ref)
        nothing = await grader.grade(task, "```bash\ntrue\n```")
        assert nothing.value == 0.0, (task.id, nothing)


def test_terminal_tasks_are_reproducible_and_grow_with_difficulty() -> None:
    a = generate_tasks("terminal", n=5, seed=7, difficulty=0.5)
    b = generate_tasks("terminal", n=5, seed=7, difficulty=0.5)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    easy = generate_tasks("terminal", n=20, seed=1, difficulty=0.0)
    hard = generate_tasks("terminal", n=20, seed=1, difficulty=1.0)
    size = lambda ts: sum(len(t.workspace.files) for t in ts if t.workspace)  # noqa: E731
    assert size(hard) > 2 * size(easy)
    assert all(len([k for k in t.metadata.tags if k in JOBS]) == 1 for t in easy)
    assert any(len([k for k in t.metadata.tags if k in JOBS]) == 2 for t in hard)


async def test_intercode_tasks_are_graded_against_the_gold_commands_effect(grader: Grader) -> None:
    from dojo.tasks import load_source

    tasks = {t.id: t for t in load_source("intercode:bash")}
    count, sort_r = tasks["intercode:bash/0"], tasks["intercode:bash/3"]
    assert count.workspace is not None and "testbed/dir1/textfile1.txt" in count.workspace.files
    assert "testbed/dir1/subdir2" in count.workspace.directories  # empty directories exist too
    for task in (count, sort_r):
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        assert (await grader.grade(task, "```bash\ntrue\n```")).value == 0.0, task.id
    # another command with the same output passes; a different count does not
    assert (await grader.grade(count, "```bash\nfind testbed -print | wc -l\n```")).value == 1.0
    assert (await grader.grade(count, "```bash\nfind testbed -type f | wc -l\n```")).value == 0.0
    # the right file, but also a stray one: the tree differs from the gold's
    stray = "```bash\nsort -r testbed/dir1/textfile1.txt > testbed/dir1/textfile1_reverse_sorted.txt; touch x\n```"
    assert (await grader.grade(sort_r, stray)).value == 0.0


BROKEN_CONFIGS = [
    ("ini", "port = 8080\n"),  # no section header: configparser's own error, not a ValueError
    ("ini", "[service]\nport = 1\nport = 2\n"),
    ("ini", "[service]\nport = 1\n[service]\nname = x\n"),
    ("toml", "a = " + "[" * 3000 + "]" * 3000 + "\n"),  # tomllib's RecursionError
    ("toml", "a = " + "{b = " * 3000 + "1" + "}" * 3000 + "\n"),
    ("toml", "a" + ".a" * 100 + " = 1\n"),  # deeper than any configuration: tables 101 deep
    ("json", "[" * 100000 + "]" * 100000),
]


@pytest.mark.parametrize("kind,text", BROKEN_CONFIGS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(BROKEN_CONFIGS)])
def test_a_config_file_that_does_not_parse_fails_its_check_and_never_raises(kind: str, text: str) -> None:
    """The file is the candidate's: whatever its parser raises on it fails the check (a grade had
    raised, and a rollout's scheduler stops on a grader's exception: one natural mistake, an INI
    file without a section header, ended a whole run)."""
    report = {"tree": {"service/config": {"type": "file", "mode": 0o644, "text": text}}}
    ok, why = check_passes({"path": "service/config", "values": {"service.port": "8080"}, "format": kind}, report)
    assert not ok and "does not parse" in why, why
