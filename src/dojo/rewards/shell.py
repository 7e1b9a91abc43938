"""Grading a ``shell`` task: the candidate's bash script runs on the task's file tree, then the final
state is read by trusted code and compared here, outside the sandbox, with the task's checks.

The run is a harness run (``AsyncSandbox.run(harness=True)``): the shell check
(``dojo.rewards.programs.shell_check``) is a trusted Python process that gets its job on a private
stdin, runs the script as a child (in ``/box/work``, the tree), waits for it (or its time), kills
every process the script left (``kill(-1)``: all of the run's uid but itself), and only then walks
the tree: each entry's type, mode, size and SHA-256, small files' text, archives' member names. It
is non-dumpable with every blockable signal blocked, so the script can neither read nor change it:
it can kill or stop it, which fails the task. A forged tree gives nothing: the checks are on the
state itself, so writing that state is doing the task.

Checks (``TestCase.expected`` of a shell task), each one pass/fail:

- ``{"path": P, "exists": false}``: nothing at P;
- ``{"path": P, "type": "dir" | "file" | "link"}``;
- ``{"path": P, "sha256": H}`` (a file with that content), ``{"path": P, "text": T}`` (that text,
  trailing whitespace of each line ignored);
- ``{"path": P, "mode": M}``: permission bits (an int, e.g. ``0o755`` = 493);
- ``{"path": P, "members": [...]}``: a .tar, .tar.gz, .tgz or .zip holding exactly those files;
- ``{"stdout": T}``: what the script printed (stripped, lines' trailing whitespace ignored);
- ``{"path": P, "untouched": true}``: nothing changed the file's inode while the script ran (its
  ctime is older than the run: changing a file and changing it back is caught);
- ``{"path": P, "format": "json" | "toml" | "ini", "values": {"server.port": 8080, ...}}``: the file
  parses as that format and sets those values (dotted keys for sections);
- ``{"probe": {"port": N, "path": "/health", "wait": 5}, "status": 200, "json": {...}, "command":
  [...]}``: what the script left running answers ``GET`` on 127.0.0.1:N (asked after the script
  ends, before anything is killed; retried for ``wait`` seconds while the port is closed) with that
  status and a JSON object holding those values, served by ``python3`` running exactly ``command``
  (its arguments, read from ``/proc``) with no ``PYTHON*`` environment variable;
- ``{"reference_state": true}``: the same output and tree as the task's reference script leaves,
  run on the same tree in the same grading (InterCode's gold commands: ``same_state``).

A check with ``"guard": true`` is a state that must not change (a file the task did not ask to
touch): not scored, but one that fails scores the task 0 (doing nothing never earns a reward).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from dojo.rewards.outcome import CaseOutcome
from dojo.rewards.programs import program_source
from dojo.sandbox import InputFile, Limits, Program, SandboxAPI, Verdict
from dojo.sandbox.guest import trusted
from dojo.tasks.model import Task
from dojo.tasks.values import untrusted_json

SHELL_GRADING_LIMITS = Limits(wall_time=60.0, cpu_time=30.0, memory=512 << 20, processes=64, disk=128 << 20)
CHECKS = ("exists", "type", "sha256", "text", "mode", "members", "stdout", "values", "untouched", "probe")


def probes_of(task: Task) -> list[dict[str, Any]]:
    """The HTTP requests the task's checks need answered (each once, in the order first named)."""
    out: list[dict[str, Any]] = []
    for t in task.tests:
        spec = t.expected.get("probe") if isinstance(t.expected, dict) else None
        if isinstance(spec, dict) and spec not in out:
            out.append(spec)
    return out


def shell_program(task: Task, script: str, timeout: float) -> Program:
    assert task.workspace is not None
    executable = set(task.workspace.executable)
    files = [InputFile(path=f"work/{path}", content=text.encode(), executable=path in executable)
             for path, text in task.workspace.files.items()]  # fmt: skip
    if not files:
        files = [InputFile(path="work/.keep", content=b"")]
    return Program(
        language="python",
        source=program_source("shell_check", (trusted,)),  # only definitions at its top: preloaded by the slot
        stdin=json.dumps(
            {"script": script, "timeout": timeout, "directories": task.workspace.directories, "probes": probes_of(task)}
        ),
        files=files,
        environment=task.environment,
    )


async def run_shell_script(
    task: Task, script: str, sandbox: SandboxAPI, limits: Limits | None = None
) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """(report, infrastructure error, why there is no report) of ``script`` on ``task``'s tree."""
    limits = limits or task.limits or SHELL_GRADING_LIMITS
    result = await sandbox.run(shell_program(task, script, max(1.0, limits.wall_time - 5.0)), limits, harness=True)
    if result.verdict is Verdict.SANDBOX_ERROR:
        return None, result.sandbox_error or "sandbox error", None
    try:
        if result.exit_code != 0:  # the check ends by itself once its report is out: a check ended
            raise ValueError  # early (killed, or by a limit) has not said all (a forged report with it)
        report = untrusted_json(result.stdout)
        if report.get("dojo_shell") != 1:
            raise ValueError
    except (ValueError, AttributeError):
        why = result.limit.value + " limit" if result.limit else f"exit code {result.exit_code}"
        return None, None, f"the state could not be read ({why}; the script may have stopped the check)"
    return report, None, None


def same_state(got: dict[str, Any], want: dict[str, Any]) -> tuple[bool, str]:
    """Whether two final states agree: the same output (in order, or as the same lines in another
    order, each line's surrounding whitespace ignored: ``wc -l`` pads its counts, and whichever line
    comes first loses its padding to the output's strip) and the same tree (every entry's type, mode,
    contents and archive members)."""

    def output(report: dict[str, Any]) -> list[str]:  # each slot has its own uid: `ls -l` shows it
        text = str(report.get("stdout", ""))
        uid = report.get("uid")
        return _lines(re.sub(rf"\b{uid}\b", "user", text) if isinstance(uid, int) else text)

    out, ref = output(got), output(want)
    if out != ref and sorted(line.strip() for line in out) != sorted(line.strip() for line in ref):
        return False, "the output differs from the reference's"

    def entry(e: dict[str, Any]) -> dict[str, Any]:
        # an archive by its members: its bytes hold the time it was made (gzip, tar headers)
        keys = ("type", "mode", "members", "target") if "members" in e else ("type", "mode", "sha256", "target")
        return {k: e.get(k) for k in keys}

    mine = {p: entry(e) for p, e in got["tree"].items()}
    theirs = {p: entry(e) for p, e in want["tree"].items()}
    if mine != theirs:
        differ = sorted(set(mine) ^ set(theirs)) or sorted(p for p in mine if mine[p] != theirs.get(p))
        return False, f"the files differ from the reference's ({len(differ)} paths, e.g. {differ[0]})"
    return True, ""


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines()]


CONFIG_DEPTH = 64  # levels of nesting a configuration may have (a deeper one "does not parse")


def parse_config(text: str, kind: str) -> dict[str, Any]:
    """A configuration file's settings, flattened to dotted keys (``server.port``): ``json``,
    ``toml`` or ``ini`` (values as text). ValueError when it does not parse: the file is the
    candidate's, so whatever its parser raises on it (configparser's own errors for a missing
    section header or a repeated option, a RecursionError for brackets nested thousands deep) is a
    file that does not parse, never an error of the grading."""
    import configparser
    import tomllib

    try:
        if kind == "json":
            data = untrusted_json(text)
        elif kind == "toml":
            data = tomllib.loads(text)
        elif kind == "ini":
            parser = configparser.ConfigParser(interpolation=None)
            parser.read_string(text)
            data = {section: dict(parser[section]) for section in parser.sections()}
        else:
            raise ValueError(f"unknown configuration format {kind!r}")
    except (configparser.Error, RecursionError, MemoryError) as e:
        raise ValueError(f"{type(e).__name__}: {str(e)[:200]}") from None
    if not isinstance(data, dict):
        raise ValueError("the configuration is not a mapping")
    flat: dict[str, Any] = {}
    stack: list[tuple[str, Any, int]] = [("", data, 0)]
    while stack:
        prefix, value, depth = stack.pop()
        if not isinstance(value, dict):
            flat[prefix] = value
        elif depth >= CONFIG_DEPTH:
            raise ValueError(f"the configuration nests more than {CONFIG_DEPTH} levels deep")
        else:
            stack += [(f"{prefix}.{k}" if prefix else str(k), v, depth + 1) for k, v in reversed(value.items())]
    return flat


def _probe_passes(check: dict[str, Any], report: dict[str, Any], index: int) -> tuple[bool, str]:
    probes = report.get("probes") or []
    answer = probes[index] if index < len(probes) else {"error": "not asked"}
    url = f"http://127.0.0.1:{check['probe'].get('port')}{check['probe'].get('path')}"
    if "error" in answer:
        return False, f"{url} did not answer ({answer['error']})"
    if "status" in check and answer.get("status") != check["status"]:
        return False, f"{url} answered {answer.get('status')}, not {check['status']}"
    if "json" in check:
        try:
            body = untrusted_json(answer.get("body", ""))
        except ValueError:
            return False, f"{url} did not answer with JSON"
        wrong = [k for k, v in check["json"].items() if not isinstance(body, dict) or body.get(k) != v]
        if wrong:
            return False, f"{url} answered other values for {', '.join(sorted(wrong)[:5])}"
    if "command" in check:  # the process serving it: python3 running exactly this command
        cmdline = answer.get("cmdline") or []
        if not cmdline or not os.path.basename(cmdline[0]).startswith("python3") or cmdline[1:] != check["command"]:
            return False, f"{url} is served by another program ({' '.join(cmdline)[:200] or 'unknown'})"
        if answer.get("python_env"):
            return False, f"{url} is served by a Python run with {', '.join(answer['python_env'])} set"
    return True, ""


def check_passes(
    check: dict[str, Any], report: dict[str, Any], probes: list[dict[str, Any]] | None = None
) -> tuple[bool, str]:
    """Whether the final state ``report`` satisfies ``check``, and what was found when it does not.
    ``probes``: the HTTP requests the report answers, in order (``probes_of``)."""
    if "probe" in check:
        asked = probes or []
        return _probe_passes(check, report, asked.index(check["probe"]) if check["probe"] in asked else len(asked))
    if "stdout" in check:
        ok = _lines(report.get("stdout", "")) == _lines(str(check["stdout"]))
        return ok, "" if ok else "the output differs"
    path = str(check.get("path", ""))
    entry = report["tree"].get(path)
    if check.get("exists") is False:
        return entry is None, "" if entry is None else f"{path} still exists"
    if entry is None:
        return False, f"{path} does not exist"
    if "type" in check and entry.get("type") != check["type"]:
        return False, f"{path} is a {entry.get('type')}, not a {check['type']}"
    if "sha256" in check and entry.get("sha256") != check["sha256"]:
        return False, f"{path} has other contents"
    if "text" in check and ("text" not in entry or _lines(entry["text"]) != _lines(str(check["text"]))):
        return False, f"{path} has other contents"
    if "mode" in check and entry.get("mode") != int(check["mode"]):
        return False, f"{path} has mode {oct(entry.get('mode', 0))}, not {oct(int(check['mode']))}"
    if check.get("untouched") and not entry.get("ctime", 0) < report.get("started_at", 0):
        return False, f"{path} was changed (and perhaps changed back) while the script ran"
    if "values" in check:  # the configuration as its program parses it
        try:
            settings = parse_config(entry.get("text", ""), str(check.get("format", "json")))
        except (ValueError, TypeError) as e:
            return False, f"{path} does not parse as {check.get('format', 'json')}: {str(e)[:200]}"
        wrong = sorted(k for k, v in check["values"].items() if settings.get(k) != v)
        if wrong:
            return False, f"{path} sets other values for {', '.join(wrong[:5])}"
    if "members" in check and sorted(entry.get("members", [])) != sorted(check["members"]):
        return False, f"{path} holds other files" + (f" ({entry['members_error']})" if "members_error" in entry else "")
    return True, ""


def shell_outcomes(task: Task, report: dict[str, Any], reference: dict[str, Any] | None = None) -> list[CaseOutcome]:
    cases = []
    probes = probes_of(task)
    for i, test in enumerate(task.tests):
        if test.expected.get("reference_state"):
            ok, why = same_state(report, reference) if reference is not None else (False, "no reference state")
        else:
            ok, why = check_passes(test.expected, report, probes)
        cases.append(CaseOutcome(index=i, passed=ok, detail=why if test.visible else ("" if ok else "check failed")))
    return cases
