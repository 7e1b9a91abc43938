"""``dojo tasks``: audit and export task sets."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import fsspec
import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dojo.cli.output import console, err_console, fail, writable_file
from dojo.cli.running import run_async
from dojo.errors import InputError
from dojo.rewards.audit import AuditReport, audit_tasks
from dojo.rewards.bug_mining import choose_canaries, mine_bugs, refill_canaried
from dojo.rewards.bug_mining import recapture as recapture_avoid
from dojo.sandbox import AsyncSandbox, SandboxError
from dojo.tasks.files import TaskFileError, save_tasks
from dojo.tasks.model import Task
from dojo.tasks.sources import load_source
from dojo.tasks.swe import DATA, PACKAGES
from dojo.user_files import read_user_text

tasks_app = typer.Typer(help="Audit and export verifiable task sets.", no_args_is_help=True)


def _load(source: str, limit: int | None) -> list[Task]:
    try:
        with err_console.status(f"loading {escape(source)} (a family's tasks are generated: seconds per 1,000)"):
            tasks = load_source(source)
    except (TaskFileError, ValueError) as e:
        fail(str(e))
    if limit is not None:
        if limit < 1:
            fail("--limit must be at least 1")
        tasks = tasks[:limit]
    if not tasks:
        fail(f"{source} has no tasks")
    return tasks


AUDIT_ROWS = 40  # rows of findings shown without --all (problems first; the --json report has every one)


def _table(report: AuditReport, show_all: bool) -> Table:
    table = Table("task", "form", "status", "reference", "trivial passes", "difficulty", "notes")
    listed = report.tasks if show_all else [t for t in report.tasks if t.status != "ok" or t.warnings]
    listed = sorted(listed, key=lambda t: t.status == "ok")  # problems first, in task order
    more = len(listed) - AUDIT_ROWS if not show_all and len(listed) > AUDIT_ROWS else 0
    for t in listed[: len(listed) - more]:
        colour = {"ok": "green", "unverifiable": "red", "error": "yellow"}[t.status]
        refs = "/".join("-" if v is None else f"{v:g}" for v in t.reference_rewards) or "none"
        diff = "" if t.difficulty is None else f"{t.difficulty:.2f} ({t.difficulty_source})"
        notes = "; ".join([*t.problems, *t.warnings])[:120]
        table.add_row(t.id, t.form, f"[{colour}]{t.status}[/{colour}]", refs, ", ".join(t.trivial_passed), diff, notes)
    if more:
        table.add_row(f"... {more} more", "", "", "", "", "", "--all lists every task; --json writes the full report")
    return table


@tasks_app.command()
def audit(
    source: Annotated[str, typer.Argument(help="Task source: humaneval, reasoning_gym:..., family:..., or a file.")],
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the full report as JSON here.")] = None,
    repeats: Annotated[int, typer.Option(min=1, max=10, help="Runs of each reference (flakiness).")] = 2,
    limit: Annotated[int | None, typer.Option(help="Audit only the first N tasks.")] = None,
    show_all: Annotated[bool, typer.Option("--all", help="List every task, not only those with findings.")] = False,
    mutants: Annotated[
        int, typer.Option(min=0, max=200, help="Grade N one-line mutants of each reference: the mutation score.")
    ] = 0,
    pool_size: Annotated[
        int | None, typer.Option(min=1, max=1024, help="Sandbox slots (default: 2 per core, at least 4).")
    ] = None,
) -> None:
    """Check that every task is verifiable: its reference passes (every time), trivial and empty
    candidates fail, and no prompt is a near-duplicate. Exit code 1 when any task is not verifiable."""
    writable_file(json_path, "--json")
    started = time.perf_counter()
    tasks = _load(source, limit)
    loaded_s = time.perf_counter() - started

    async def go() -> AuditReport:
        with Progress(TextColumn("auditing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as bar:  # fmt: skip
            job = bar.add_task("audit", total=len(tasks))
            async with AsyncSandbox(pool_size=pool_size) as sandbox:
                return await audit_tasks(
                    tasks, sandbox, repeats=repeats, progress=lambda n: bar.update(job, completed=n), mutants=mutants
                )

    try:
        report = run_async(go())
    except SandboxError as e:
        fail(str(e))
    table = _table(report, show_all)
    if table.row_count:
        console.print(table)
    s = report.summary()
    console.print(
        f"{s['tasks']} tasks: [green]{s['verifiable']} verifiable[/green], "
        f"[red]{s['unverifiable']} unverifiable[/red], {s['errors']} errors, "
        f"{s['near_duplicates']} with near-duplicates; audited in {s['seconds']} s "
        f"(the tasks loaded in {loaded_s:.1f} s before)"
    )
    if "mutation_score" in s:
        console.print(
            f"mutation score {s['mutation_score']:.3f}: {s['mutants_survived']} of {s['mutants']} mutants of the "
            f"references passed every test, in {s['tasks_with_survivors']} tasks (weak tests; some may be equivalent)"
        )
    if s["problems"]:
        console.print("problems: " + ", ".join(f"{k} x{v}" for k, v in sorted(s["problems"].items())))
    if malformed := [t.id for t in report.tasks if any(p.startswith("answer_malformed:") for p in t.problems)]:
        console.print(f"unverifiable, possible answer malformed ({len(malformed)}): {', '.join(malformed)}")
    if json_path is not None:
        json_path.write_text(json.dumps(report.to_json(), indent=2))
        console.print(f"report written to {json_path}")
    if report.unverifiable:
        raise typer.Exit(1)


@tasks_app.command()
def export(
    source: Annotated[str, typer.Argument(help="Task source (see 'dojo tasks audit --help').")],
    out: Annotated[str, typer.Argument(help="Output file: .jsonl or .parquet (any fsspec URL).")],
    limit: Annotated[int | None, typer.Option(help="Export only the first N tasks.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace OUT if it exists.")] = False,
) -> None:
    """Write a task source to a JSONL or Parquet file."""
    if Path(source).is_file() and Path(out).is_file() and os.path.samefile(source, out):
        fail(f"{out} is the source it would be written from; give another OUT")
    try:  # (an existing OUT had been replaced without a word, even when it was the source itself)
        fs, path = fsspec.core.url_to_fs(out)
        exists = fs.exists(path)
    except (ImportError, ValueError, OSError) as e:
        fail(f"cannot open {out!r}: {e}")
    if exists and not force:
        fail(f"{out} exists; choose another OUT, or pass --force to replace it")
    tasks = _load(source, limit)
    try:
        n = save_tasks(tasks, out)
    except (TaskFileError, OSError) as e:
        fail(str(e))
    console.print(f"wrote {n} tasks to {out}")


@tasks_app.command("swe-mine")
def swe_mine(
    package: Annotated[str, typer.Argument(help=f"The package: {', '.join(sorted(PACKAGES))}.")],
    target: Annotated[int, typer.Option(min=1, max=2000, help="Bugs to keep.")] = 50,
    seed: Annotated[int, typer.Option(help="Which mutants are tried, and in what order.")] = 0,
    per_module: Annotated[int, typer.Option(min=1, max=1000, help="Mutants drawn from each module.")] = 12,
    max_minutes: Annotated[float | None, typer.Option(min=1, help="Stop drawing mutants after this long.")] = None,
    out: Annotated[Path | None, typer.Option(help="Data file (default: the one swe:PACKAGE loads).")] = None,
) -> None:
    """Find single-line bugs in PACKAGE that its own tests catch (run in the sandbox) and write them
    as the data of the swe:PACKAGE task source."""
    if package not in PACKAGES:
        fail(f"no recipe for {package!r}; known packages: {', '.join(sorted(PACKAGES))}")
    path = out or DATA / f"{package}.json"
    path.parent.mkdir(parents=True, exist_ok=True)

    def save(data: dict[str, object]) -> None:  # after every bug kept: a stopped run keeps what it found
        path.write_text(json.dumps(data, indent=1) + "\n")

    async def go() -> dict[str, object]:
        async with AsyncSandbox() as sandbox:
            return await mine_bugs(
                package, sandbox, target=target, seed=seed, per_module=per_module, progress=console.print,
                max_seconds=max_minutes * 60 if max_minutes else None, checkpoint=save,
            )  # fmt: skip

    try:
        data = run_async(go())
    except (SandboxError, RuntimeError, ValueError) as e:
        fail(str(e))
    save(data)
    console.print(f"{len(data['bugs'])} bugs of {package} written to {path}")  # type: ignore[arg-type]
    swe_canaries(package, data=path)


def _bugs_file(path: Path) -> dict[str, Any]:
    """A mining's data file (``swe-mine --out``): an object with a ``bugs`` list of objects. Another
    shape had been an AttributeError or KeyError traceback, or an error that said only ``'bugs'``."""
    try:
        data = json.loads(read_user_text(path, "the bugs file"))
    except InputError as e:
        fail(str(e))
    except ValueError as e:
        fail(f"{path} is not JSON ({e})")
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("bugs"), list)
        or not all(isinstance(b, dict) for b in data["bugs"])
    ):
        fail(f"{path}: expected an object with a 'bugs' list of objects (as dojo tasks swe-mine writes)")
    return data


@tasks_app.command("swe-refill")
def swe_refill(
    package: Annotated[str, typer.Argument(help=f"The package: {', '.join(sorted(PACKAGES))}.")],
    extra: Annotated[Path, typer.Argument(help="Another mining of the package (swe-mine --seed N --out FILE).")],
    data: Annotated[Path | None, typer.Option(help="Data file (default: the one swe:PACKAGE loads).")] = None,
) -> None:
    """Replace the recorded bugs of PACKAGE that have no canary by bugs of EXTRA that have one (and
    that are not recorded already). Rewrites the data file; task ids are given anew."""
    if package not in PACKAGES:
        fail(f"no recipe for {package!r}; known packages: {', '.join(sorted(PACKAGES))}")
    path = data or DATA / f"{package}.json"
    recorded, more = _bugs_file(path), _bugs_file(extra)
    try:
        refilled, replaced = refill_canaried(recorded, more)
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"cannot refill the bugs of {package} from {extra}: {e}")
    path.write_text(json.dumps(refilled, indent=1) + "\n")
    have = sum("canary" in b for b in refilled["bugs"])
    console.print(f"replaced {replaced}: {have} of {len(refilled['bugs'])} bugs of {package} have canaries; "
                  f"written to {path}")  # fmt: skip


@tasks_app.command("swe-canaries")
def swe_canaries(
    package: Annotated[str, typer.Argument(help=f"The package: {', '.join(sorted(PACKAGES))}.")],
    data: Annotated[Path | None, typer.Option(help="Data file (default: the one swe:PACKAGE loads).")] = None,
    recapture: Annotated[
        bool, typer.Option(help="Keep the chosen sites; only record again what the bug computes there.")
    ] = False,
) -> None:
    """Choose each recorded bug's canaried test (dojo.tasks.canaries), checked by running: the
    reference passes it and no canary, the tree as given passes none. Rewrites the data file."""
    if package not in PACKAGES:
        fail(f"no recipe for {package!r}; known packages: {', '.join(sorted(PACKAGES))}")
    path = data or DATA / f"{package}.json"
    if not path.exists():
        fail(f"no bugs of {package} at {path}; mine them first (dojo tasks swe-mine {package})")
    recorded = _bugs_file(path)

    async def go() -> dict[str, Any]:
        async with AsyncSandbox() as sandbox:
            if recapture:
                return await recapture_avoid(package, recorded, sandbox, progress=console.print)
            return await choose_canaries(package, recorded, sandbox, progress=console.print)

    try:
        chosen = run_async(go())
    except (SandboxError, RuntimeError, ValueError) as e:
        fail(str(e))
    path.write_text(json.dumps(chosen, indent=1) + "\n")
    have = sum("canary" in b for b in chosen["bugs"])
    console.print(f"{have} of {len(chosen['bugs'])} bugs of {package} have canaries; written to {path}")
