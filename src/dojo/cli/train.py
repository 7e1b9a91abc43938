"""``dojo train [CONFIG]``: the whole loop on one machine (see ``dojo.train.run``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dojo.cli.output import err_console as console
from dojo.cli.output import fail


def _value(raw: str) -> object:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def train(
    config: Annotated[
        Path | None, typer.Argument(help="YAML config (see --print-config); omit for the embedded default.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Output directory (overrides output.dir).")] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the run in the output directory from its last checkpoint.")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Overrides seed.")] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="Override one field, e.g. --set grpo.steps=100 (repeatable; values are JSON or text)."
        ),
    ] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the default config as YAML and exit.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")] = False,
) -> None:
    """Train a policy: warm start, then GRPO with dojo's rewards; writes checkpoints, trajectories,
    metrics and a before/after report to the output directory."""
    from dojo.train.config import ConfigError, build_config, default_yaml, load_config

    if print_config:
        typer.echo(default_yaml(), nl=False)
        return
    overrides: dict[str, object] = {}
    for item in set_ or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            fail(f"--set takes FIELD=VALUE (e.g. grpo.steps=100), got {item!r}")
        overrides[key.strip()] = _value(raw)
    if out is not None:
        overrides["output.dir"] = str(out)
    if seed is not None:
        overrides["seed"] = seed
    try:
        cfg = load_config(config, overrides) if config is not None else build_config({}, overrides, origin="--set")
    except ConfigError as e:
        fail(str(e))

    from dojo.cluster.connect import ClusterUnavailable
    from dojo.train.report import report_table
    from dojo.train.run import RunDirError
    from dojo.train.run import train as run_training

    try:
        result = run_training(cfg, resume=resume, console=console)
    except (RunDirError, ClusterUnavailable, ValueError) as e:
        fail(str(e))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; `--resume` continues from the last finished phase or checkpoint[/]")
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    if result.interrupted:
        raise typer.Exit(130)
    console.print(report_table(result.before, result.after))
    console.print(
        f"done in {result.wall_seconds / 60:.1f} min ({result.steps} GRPO steps); "
        f"report: {result.output_dir}/report.md, curve: {result.output_dir}/reward_curve.png"
    )
