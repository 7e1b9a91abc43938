"""``dojo env build|list|show|rm``: the Python environments runs can use (``Program(environment=NAME)``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dojo.cli.output import console, fail
from dojo.cli.running import run_async
from dojo.errors import InputError
from dojo.sandbox import AsyncSandbox, Program, SandboxError, Verdict
from dojo.sandbox.environment import Environment, EnvironmentSpecError, EnvironmentStore, PipIndex
from dojo.user_files import read_user_text

env_app = typer.Typer(help="Python environments for runs: build, list, show, remove.", no_args_is_help=True)

Root = Annotated[
    Path | None,
    typer.Option("--root", help="Where environments are stored (default: $DOJO_HOME/environments or ~/.cache/dojo)."),
]


def _read_lines(path: Path, what: str) -> list[str]:
    try:
        return read_user_text(path, f"{what} file").splitlines()
    except InputError as e:
        fail(str(e))


def check_environment(environment: Environment, store: EnvironmentStore) -> str:
    """Import the environment's preload modules in a real sandboxed run: the slots start as they
    will for every run. Returns what the run printed."""
    modules = list(environment.preload)
    source = "import importlib, sys\n" + "".join(
        f"print({m!r}, getattr(importlib.import_module({m!r}), '__version__', ''))\n" for m in modules
    )

    async def go() -> str:
        async with AsyncSandbox(pool_size=1, environments=store, environment_pool_size=1) as sandbox:
            result = await sandbox.run(Program(language="python", source=source, environment=environment.ref))
        if result.verdict is not Verdict.ACCEPTED:  # (a slot that did not start says why in sandbox_error)
            why = result.sandbox_error or result.stderr[-2000:]
            raise SandboxError(f"the environment's check run ended {result.verdict.value}: {why}")
        return result.stdout

    return run_async(go())


@env_app.command()
def build(
    name: Annotated[str, typer.Argument(help="The environment's name (lowercase letters, digits, '.', '_', '-').")],
    requirements: Annotated[
        Path | None, typer.Option("-r", "--requirements", help="A requirements file (pip's format, no options).")
    ] = None,
    lock: Annotated[Path | None, typer.Option("--lock", help="A lock file: one 'name==version' per line.")] = None,
    preload: Annotated[
        str | None,
        typer.Option(help="Modules every warm slot imports, comma-separated (default: the packages asked for)."),
    ] = None,
    warmup: Annotated[
        Path | None,
        typer.Option(
            help="A Python file each warm slot runs once after the imports (exercise the libraries so "
            "their lazy set-up is done there, not in every run)."
        ),
    ] = None,
    index_url: Annotated[str | None, typer.Option(help="Package index (default: pip's configuration).")] = None,
    find_links: Annotated[
        list[str] | None, typer.Option(help="A local wheelhouse (directory) or links page; repeatable.")
    ] = None,
    no_index: Annotated[bool, typer.Option(help="Use only --find-links, never an index.")] = False,
    check: Annotated[bool, typer.Option(help="Import the preload modules in a sandboxed run after building.")] = True,
    root: Root = None,
) -> None:
    """Build (or reuse) an environment from requirements or a lock, and name it."""
    if (requirements is None) == (lock is None):
        fail("give either -r requirements.txt or --lock lock.txt")
    if index_url is not None and not index_url.startswith(("http://", "https://", "file://")):
        fail(f"--index-url {index_url!r}: give the index's URL (http(s)://.../simple, or file:///path)")
    store = EnvironmentStore(root)
    try:
        environment = store.build(
            name,
            requirements=_read_lines(requirements, "requirements") if requirements else None,
            lock=_read_lines(lock, "lock") if lock else None,
            preload=[m.strip() for m in preload.split(",") if m.strip()] if preload is not None else None,
            index=PipIndex(index_url, tuple(find_links or ()), no_index),
            warmup="\n".join(_read_lines(warmup, "warm-up")) if warmup else None,
        )
    except EnvironmentSpecError as e:
        fail(str(e))
        return
    console.print(f"built [bold]{environment.ref}[/] ({len(environment.lock)} packages) at {environment.path}")
    if check and environment.preload:
        try:
            console.print(check_environment(environment, store).rstrip())
        except (SandboxError, EnvironmentSpecError) as e:
            fail(f"{environment.ref} was built but its modules do not import in a sandbox: {e}")
    console.print(f'use it with Program(environment={name!r}) or "environment": {json.dumps(name)} over HTTP')


@env_app.command("list")
def list_(root: Root = None) -> None:
    """The environments on this machine."""
    table = Table("name", "version", "packages", "preload", "warm-up", "versions")
    store = EnvironmentStore(root)
    for environment in store.all():
        versions = len(store.versions(environment.name))
        table.add_row(
            environment.name, environment.version, str(len(environment.lock)), ", ".join(environment.preload),
            _warmup_size(environment.warmup), str(versions),
        )  # fmt: skip
    console.print(table)


def _warmup_size(warmup: str) -> str:
    lines = len(warmup.splitlines())
    return f"{lines} line{'s' if lines != 1 else ''}" if warmup else ""


@env_app.command()
def show(
    ref: Annotated[str, typer.Argument(help="NAME or NAME@VERSION.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    root: Root = None,
) -> None:
    """One environment: its lock, preload modules, versions and size."""
    store = EnvironmentStore(root)
    try:
        environment = store.get(ref)
    except EnvironmentSpecError as e:
        fail(str(e))
        return
    info = {
        **environment.describe(),
        "versions": [v.version for v in store.versions(environment.name)],
        "size_bytes": environment.size_bytes(),
    }
    if as_json:
        console.print_json(json.dumps(info))
        return
    for key in ("name", "version", "path", "python", "preload", "requirements", "versions", "size_bytes"):
        value = info[key]
        console.print(f"{key}: {', '.join(value) if isinstance(value, list) else value}")
    if environment.warmup:  # (names that share their files may differ only here)
        console.print(f"warm-up: {_warmup_size(environment.warmup)} (the code: --json)")
    console.print("lock:\n  " + "\n  ".join(environment.lock))


@env_app.command()
def rm(
    ref: Annotated[str, typer.Argument(help="NAME (every version) or NAME@VERSION.")],
    root: Root = None,
) -> None:
    """Remove an environment (its files go once no name uses them)."""
    try:
        gone = EnvironmentStore(root).remove(ref)
    except EnvironmentSpecError as e:
        fail(str(e))
        return
    console.print(f"removed {ref.partition('@')[0]}: {', '.join(gone)}")
