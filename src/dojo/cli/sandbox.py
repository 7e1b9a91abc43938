"""``dojo run``, ``dojo serve``, ``dojo languages`` and ``dojo demo``: the sandbox from the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dojo.cli.output import console, err_console, fail, problem
from dojo.cli.running import run_async
from dojo.errors import InputError
from dojo.sandbox import AsyncSandbox, Limits, Program, SandboxError, Verdict
from dojo.sandbox.backend import Isolation
from dojo.sandbox.languages import LANGUAGES, get_language
from dojo.user_files import read_user_text

# A file's language by its suffix: each language's own source file's (the first language of a suffix:
# python before pytest, go before go_test, java before junit, typescript before jest), and the common
# others. Six had been guessed, of 25 languages (`dojo run Main.java` said it could not guess).
SUFFIXES = {
    **{suffix: name for name, lang in reversed(LANGUAGES.items()) if (suffix := Path(lang.source_file).suffix)},
    ".cc": "cpp", ".cxx": "cpp", ".c++": "cpp", ".mjs": "javascript", ".cjs": "javascript", ".bash": "bash",
    ".r": "r", ".v": "verilog", ".rkt": "racket",
}  # fmt: skip


def run(
    file: Annotated[Path, typer.Argument(help="Source file to run ('-' reads stdin).")],
    language: Annotated[str | None, typer.Option("--language", "-l", help="Language; guessed from the suffix.")] = None,
    stdin: Annotated[Path | None, typer.Option(help="File fed to the program's stdin.")] = None,
    wall_time: Annotated[float, typer.Option(help="Wall-clock limit, seconds.", min=0.001, max=3600)] = 10.0,
    cpu_time: Annotated[float, typer.Option(help="CPU limit, seconds.", min=0.001, max=3600)] = 5.0,
    memory_mb: Annotated[int, typer.Option(help="Memory limit, MiB.", min=4, max=65536)] = 512,
    network: Annotated[
        str, typer.Option(help="none, host, or destinations to allow, comma-separated (HOST:PORT, CIDR:PORT, names).")
    ] = "none",
    strict: Annotated[bool, typer.Option(help="Fresh namespaces and interpreter for this run.")] = False,
    environment: Annotated[
        str | None, typer.Option(help="A Python environment to run in (dojo env build NAME): NAME or NAME@VERSION.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full result as JSON.")] = False,
) -> None:
    """Run one program in the sandbox and print its output and verdict."""
    try:
        source = sys.stdin.read() if str(file) == "-" else read_user_text(file, "the program")
        stdin_text = read_user_text(stdin, "--stdin") if stdin else ""
    except InputError as e:
        fail(str(e))
    lang = language or SUFFIXES.get(file.suffix) or SUFFIXES.get(file.suffix.lower())
    if lang is None:
        known = " ".join(sorted(SUFFIXES))
        fail(f"cannot guess the language of {file} from its suffix ({known}); pass --language ({', '.join(LANGUAGES)})")
        return
    try:
        get_language(lang)
        policy: str | list[str] = network if network in ("none", "host") else [e for e in network.split(",") if e]
        limits = Limits(wall_time=wall_time, cpu_time=cpu_time, memory=memory_mb << 20, network=policy)
        program = Program(language=lang, source=source, stdin=stdin_text, environment=environment)
    except ValueError as e:
        fail(problem(e))

    async def go() -> None:
        isolation: Isolation = "strict" if strict else "fast"
        async with AsyncSandbox(pool_size=1, environment_pool_size=1, isolation=isolation) as sandbox:
            result = await sandbox.run(program, limits)
        if as_json:
            print(result.model_dump_json(indent=2, exclude={"files"}))
        else:
            sys.stdout.write(result.stdout)
            sys.stderr.write(result.stderr)
            extra = f" ({result.limit})" if result.limit else ""
            err_console.print(
                f"[bold]{result.verdict}[/bold]{extra} exit={result.exit_code} signal={result.signal} "
                f"wall={result.wall_time * 1000:.1f}ms cpu={result.cpu_time * 1000:.1f}ms "
                f"peak={result.peak_memory / 2**20:.1f}MiB",
            )
            if result.sandbox_error:
                err_console.print(f"[red]sandbox error:[/red] {result.sandbox_error}")
        raise typer.Exit(0 if result.verdict is Verdict.ACCEPTED else 1)

    try:
        run_async(go())
    except (SandboxError, ValueError) as e:
        fail(str(e))


def serve(
    host: Annotated[str, typer.Option(help="Address to bind; non-loopback needs a token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to bind.", min=1, max=65535)] = 8080,
    token: Annotated[str | None, typer.Option(envvar="DOJO_TOKEN", help="Bearer token clients must send.")] = None,
    pool_size: Annotated[int | None, typer.Option(help="Warm slots (default: 2 per core).", min=1)] = None,
    queue: Annotated[int, typer.Option(help="Requests that may wait for a slot before 429.", min=0)] = 256,
    max_sessions: Annotated[int, typer.Option(help="Live sessions before 429.", min=1)] = 1000,
    session_ttl: Annotated[float, typer.Option(help="Idle seconds before a session expires.", min=1)] = 600.0,
    max_body_bytes: Annotated[int, typer.Option(help="Largest request body.", min=1024)] = 32 << 20,
    max_answer_bytes: Annotated[
        int,
        typer.Option(help="Bytes one answer may hold: a request whose limits allow more is refused; a batch stops."),
    ] = 512 << 20,
    max_batch_seconds: Annotated[
        float, typer.Option(help="Seconds after which a batch's cases left are skipped.")
    ] = 1800.0,
    allow_network: Annotated[bool, typer.Option(help="Let requests open the host's network (network 'host').")] = False,
    network_allow: Annotated[
        list[str] | None,
        typer.Option(
            help="A destination requests may list under network 'allow' (HOST:PORT, CIDR:PORT, a name); repeatable."
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            help="Serve the sandbox fleet of this Ray cluster (HOST:PORT of its head, or auto) instead of this "
            "machine's slots; --pool-size is then slots per node. Several gateways may serve one cluster."
        ),
    ] = None,
    fusion_environment: Annotated[
        str | None,
        typer.Option(
            help="The Python environment /run_code runs Python and pytest in when a request names none "
            "(default: 'sandboxfusion', SandboxFusion's image's packages, where it is built: make fusion-env; "
            "'none': the bare interpreter). With --ray, build it on every node."
        ),
    ] = None,
) -> None:
    """Serve the sandbox over HTTP: native API (/v1), SandboxFusion's /run_code, sessions, /metrics."""
    from dojo.sandbox.environment import EnvironmentStore
    from dojo.service.app import ServiceSettings
    from dojo.service.server import check_bind, check_port
    from dojo.service.server import fusion_environment as choose_fusion_environment
    from dojo.service.server import serve as run_server

    try:
        check_bind(host, token)
    except InputError as e:
        fail(str(e))
    try:
        if network_allow:
            Limits(network={"mode": "allow", "allow": network_allow})  # validates each entry
    except ValueError as e:
        fail(f"--network-allow: {problem(e)}")
    if ray is None:  # a fleet's nodes have their own stores: the name is taken as given
        try:
            fusion_environment, note = choose_fusion_environment(fusion_environment, EnvironmentStore())
        except ValueError as e:
            fail(str(e))
        if note:
            err_console.print(f"note: {note}", markup=False, highlight=False)
    elif fusion_environment == "none":
        fusion_environment = None
    try:
        settings = ServiceSettings(
            pool_size=pool_size, queue=queue, token=token, max_sessions=max_sessions,
            session_ttl=session_ttl, max_body_bytes=max_body_bytes, allow_network=allow_network,
            network_allow=tuple(network_allow or ()), fusion_environment=fusion_environment,
            max_answer_bytes=max_answer_bytes, max_batch_seconds=max_batch_seconds,
        )  # fmt: skip
    except ValueError as e:
        fail(problem(e))
    try:  # (last of the checks: a port in use is not the first thing to fix)
        check_port(host, port)
    except InputError as e:
        fail(str(e))
    if ray is None:
        run_server(host, port, settings)
        return
    from dojo.cluster import ClusterUnavailable, SandboxFleet

    try:
        # Detached node actors: a gateway that stops or restarts leaves the nodes' pools and sessions to the others.
        fleet = SandboxFleet(ray, pool_size=pool_size, session_ttl=session_ttl, detached=True)
        run_server(host, port, settings, sandbox=fleet)
    except ClusterUnavailable as e:
        fail(str(e))


def languages(
    prepare: Annotated[
        bool,
        typer.Option(help="Prepare the toolchain directory (npm packages for TypeScript/Jest, a warm Go cache)."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The languages dojo runs, whether each is usable here, and what to install for those that are not."""
    from dojo.sandbox.languages import language_status, toolchains_dir

    if prepare:
        from dojo.sandbox.toolchains import ToolchainError
        from dojo.sandbox.toolchains import prepare as prepare_toolchains

        try:
            for line in prepare_toolchains(toolchains_dir()):
                console.print(line)
        except ToolchainError as e:
            fail(str(e))
    status = language_status()
    if as_json:
        rows = [{"language": lang.name, "aliases": list(lang.aliases), "sandboxfusion": list(lang.fusion),
                 "compiled": lang.compiled, "usable": why is None, "missing": why} for lang, why in status]  # fmt: skip
        print(json.dumps(rows, indent=2))
        return
    table = Table("language", "aliases", "SandboxFusion", "usable", "to install")
    for lang, why in status:
        table.add_row(lang.name, ", ".join(lang.aliases), ", ".join(lang.fusion), "yes" if why is None else "no",
                      "" if why is None else why.rsplit("install it with: ", 1)[-1])  # fmt: skip
    console.print(table)
    usable = sum(why is None for _, why in status)
    console.print(f"{usable} of {len(status)} usable; toolchain directory: {toolchains_dir()}")


def demo(
    quick: Annotated[bool, typer.Option(help="Fewer benchmark runs.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the benchmark summary as JSON.")] = False,
) -> None:
    """Run a few programs (several languages, some hostile), then a short benchmark summary."""
    from dojo.cli.demo import run_demo

    try:
        summary = run_async(run_demo(console, quick=quick))
    except SandboxError as e:
        fail(str(e))
        return
    if as_json:
        print(json.dumps(summary, indent=2))
