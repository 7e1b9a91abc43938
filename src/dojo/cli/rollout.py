"""``dojo rollout``: run a task set against a policy, write trajectories, print pass@k."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dojo.agent.episode import EpisodeConfig
from dojo.agent.policy import OpenAIPolicy, Policy, PolicyError, SamplingParams
from dojo.cli.output import console, err_console, fail, writable_file
from dojo.cli.running import run_async
from dojo.cluster import ClusterUnavailable, sandbox_for
from dojo.rollout.costs import load_costs
from dojo.rollout.run import rollout_to_store
from dojo.rollout.scheduler import Group, RolloutConfig, RolloutScheduler
from dojo.rollout.store import TrajectoryStore
from dojo.rollout.summary import summarise
from dojo.sandbox import LanguageUnavailable, SandboxError, UnknownLanguage
from dojo.tasks.files import TaskFileError
from dojo.tasks.model import Task
from dojo.tasks.sources import canonical_source, load_source


def _policy(specs: list[str], model: str | None, api: Literal["chat", "completions"]) -> Policy:
    if len(specs) > 1:  # several servers of one model: least requests and failover
        if not all(s.startswith(("http://", "https://")) for s in specs):
            fail("several --policy values must all be http(s) URLs of OpenAI-compatible servers of one model")
        from dojo.agent.policy_pool import PolicyPool

        return PolicyPool([OpenAIPolicy(s, model, api=api) for s in specs])
    spec = specs[0]
    if spec.startswith(("http://", "https://")):
        if api == "completions":
            fail("--api completions needs a chat template; use --api chat with a server URL")
        return OpenAIPolicy(spec, model, api=api)
    path = Path(spec)
    if not (path / "config.json").is_file():
        fail(f"--policy {spec!r} is neither an http(s) URL of an OpenAI-compatible server nor a model directory")
    from dojo.agent.hf_policy import HFPolicy

    return HFPolicy.from_dir(path)


async def _rollout(
    tasks: list[Task],
    policy: Policy,
    config: RolloutConfig,
    store: TrajectoryStore,
    skip: set[str],
    shard_groups: int,
    pool_size: int | None,
    ray: str | None,
    user: Policy | None = None,
) -> RolloutScheduler:
    costs, warning = load_costs(store)
    if warning:
        err_console.print(f"[yellow]warning:[/yellow] {warning}")
    columns = (
        TextColumn("rollout"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("pass {task.fields[rate]:.1%}  reward {task.fields[reward]:.3f}  {task.fields[eps]:.1f} ep/s"),
        TimeElapsedColumn(),
    )
    todo = sum(1 for t in tasks if t.id not in skip)
    with Progress(*columns, console=err_console, transient=False) as progress:
        bar = progress.add_task("groups", total=todo, rate=0.0, reward=0.0, eps=0.0)

        def advance(group: Group, scheduler: RolloutScheduler) -> None:
            stats = scheduler.stats
            progress.update(bar, advance=1, rate=stats.pass_rate, reward=stats.mean_reward,
                            eps=stats.episodes_per_second)  # fmt: skip

        sandbox = sandbox_for(ray, pool_size)
        try:
            return await rollout_to_store(tasks, policy, config, store, costs=costs, skip=skip,
                                          shard_groups=shard_groups, sandbox=sandbox, on_group=advance,
                                          user=user)  # fmt: skip
        finally:
            await sandbox.close()


SETTINGS = "_rollout.json"  # what a run in a store was started with (``_``: Parquet readers skip it)


def _same_settings(store: TrajectoryStore, asked: dict[str, Any], resume: bool) -> None:
    """A ``--resume`` with other settings than the run's fails, saying which (a resume with another
    group size, mode and source had mixed them into one store and one pass@k table, without a
    word); the settings are recorded for the next resume."""
    path = f"{store.root.rstrip('/')}/{SETTINGS}"
    if resume and store.fs.exists(path):
        try:
            before = json.loads(store.fs.cat_file(path))
        except ValueError as e:
            fail(f"{path} is damaged ({e}): remove it to resume without the check, or choose a new --out")
        if isinstance(before.get("source"), str):  # (a run recorded before sources were kept in one spelling)
            before["source"] = canonical_source(before["source"])
        differ = [f"{k} {before.get(k)!r} (now {v!r})" for k, v in asked.items() if before.get(k, v) != v]
        if differ:
            fail(f"{store.url} was run with other settings: {', '.join(differ)}; resume with the same ones, "
                 "or choose a new --out")  # fmt: skip
    store.fs.pipe_file(path, json.dumps(asked).encode())


def _summary_table(summary: dict[str, Any], ks: list[int]) -> Table:
    table = Table("metric", "value")
    for k in ks:
        v = summary.get(f"pass@{k}")
        table.add_row(f"pass@{k}", "-" if v is None else f"{v:.3f}")
    mean = summary["mean_reward"]
    table.add_row("mean reward", "-" if mean is None else f"{mean:.3f}")
    table.add_row("groups / episodes", f"{summary['groups']} / {summary['episodes']}")
    table.add_row("verdicts", ", ".join(f"{k} {v}" for k, v in sorted(summary["verdicts"].items())))
    table.add_row("statuses", ", ".join(f"{k} {v}" for k, v in sorted(summary["statuses"].items())))
    table.add_row("tokens (prompt / completion)", f"{summary['prompt_tokens']} / {summary['completion_tokens']}")
    return table


def rollout(
    source: Annotated[str, typer.Argument(help="Task source: humaneval, reasoning_gym:..., family:..., or a file.")],
    policy: Annotated[
        list[str],
        typer.Option(
            help="OpenAI-compatible base URL (http://host:port/v1) or a model directory; repeat it for several "
            "servers of one model (least requests, failover)."
        ),
    ],
    out: Annotated[str, typer.Option(help="Trajectory store: a directory or an fsspec URL (s3://...).")],
    model: Annotated[str | None, typer.Option(help="Model name on the server (default: its first model).")] = None,
    samples: Annotated[
        int, typer.Option("--samples", "-n", min=1, max=1024, help="Episodes per task (group size).")
    ] = 4,
    mode: Annotated[str, typer.Option(help="feedback (code, tests, fix) or tools (tool calls).")] = "feedback",
    max_turns: Annotated[int, typer.Option(min=1, max=64, help="Policy calls per episode.")] = 1,
    max_tokens: Annotated[int, typer.Option(min=1, help="New tokens per policy call.")] = 512,
    temperature: Annotated[float, typer.Option(min=0.0, max=10.0, help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus sampling.")] = 1.0,
    time_limit: Annotated[float, typer.Option(min=0.1, help="Deadline of one episode, in seconds.")] = 600.0,
    policy_concurrency: Annotated[int, typer.Option(min=1, help="Policy requests in flight.")] = 32,
    groups_in_flight: Annotated[int, typer.Option(min=1, help="Groups running at once (backpressure).")] = 16,
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N tasks.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue a stopped run in OUT, skipping stored groups.")] = False,
    shard_groups: Annotated[int, typer.Option(min=1, help="Groups per Parquet shard.")] = 8,
    pool_size: Annotated[
        int | None, typer.Option(min=1, help="Sandbox slots (default: 2 per core; with --ray: per node).")
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(help="Run episodes on the sandbox fleet of this Ray cluster (HOST:PORT, or auto)."),
    ] = None,
    api: Annotated[str, typer.Option(help="chat or completions (server URLs: chat).")] = "chat",
    user_policy: Annotated[
        str | None,
        typer.Option(help="A served user model (URL or model directory) for tasks with a simulated user (tau2)."),
    ] = None,
    json_path: Annotated[Path | None, typer.Option("--json", help="Write the summary as JSON here.")] = None,
) -> None:
    """Run every task of SOURCE against a policy: groups of episodes, graded in the sandbox, written
    to OUT as Parquet; prints pass@1, pass@k, verdicts, tokens and time."""
    if mode not in ("feedback", "tools"):
        fail(f"--mode must be feedback or tools, not {mode!r}")
    if api not in ("chat", "completions"):
        fail(f"--api must be chat or completions, not {api!r}")
    if top_p <= 0:
        fail("--top-p must be greater than 0")
    writable_file(json_path, "--json")
    try:
        tasks = load_source(source)
    except (TaskFileError, ValueError) as e:
        fail(str(e))
    tasks = tasks[:limit] if limit else tasks
    if not tasks:
        fail(f"{source} has no tasks")
    chosen = _policy(policy, model, api)  # type: ignore[arg-type]  # (before --out is made: a bad one made it)
    user = _policy([user_policy], None, api) if user_policy else None  # type: ignore[arg-type]
    try:
        config = RolloutConfig(
            group_size=samples,
            policy_concurrency=policy_concurrency,
            max_groups_in_flight=groups_in_flight,
            episode=EpisodeConfig(
                mode=mode,
                max_turns=max_turns,
                max_total_tokens=max(max_tokens, max_tokens * max_turns),
                time_limit=time_limit,
                sampling=SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
            ),
        )
        store = TrajectoryStore(out)
    except (ValidationError, ValueError) as e:
        fail(str(e))
    done = store.completed_groups()
    if done and not resume:
        fail(f"{out} already holds {len(done)} groups; pass --resume to continue that run, or choose a new --out")
    asked = {"source": canonical_source(source), "samples": samples, "mode": mode, "max_turns": max_turns,
             "max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "time_limit": time_limit,
             "api": api, "model": model}  # fmt: skip
    _same_settings(store, asked, resume)
    if done:
        err_console.print(f"resuming: {len(done)} groups already stored, skipping them")
    started = time.perf_counter()
    try:
        scheduler = run_async(_rollout(tasks, chosen, config, store, done, shard_groups, pool_size, ray, user))
    except ClusterUnavailable as e:
        fail(str(e))
    except SandboxError as e:
        fail(f"sandbox error: {e}", code=1)
    except PolicyError as e:
        fail(f"{e}; start the server or fix --policy")
    except (LanguageUnavailable, UnknownLanguage) as e:
        fail(str(e))
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted:[/yellow] finished groups are stored; rerun with --resume")
        raise typer.Exit(130) from None
    ks = sorted({1, samples})
    summary = summarise(store.rows(), ks)
    summary["seconds"] = time.perf_counter() - started
    summary["retries"] = dict(scheduler.stats.retries)
    summary["groups_incomplete"] = scheduler.stats.groups_incomplete
    summary["failures"] = dict(scheduler.stats.failures)
    summary["episodes_per_second"] = scheduler.stats.episodes_per_second
    console.print(_summary_table(summary, ks))
    console.print(
        f"{scheduler.stats.episodes} episodes in {summary['seconds']:.1f} s "
        f"({summary['episodes_per_second']:.1f}/s); trajectories in {out}"
    )
    failures, last = dict(scheduler.stats.failures), scheduler.stats.last_error
    if too_long := failures.pop("prompt_too_long", 0):
        console.print(
            f"[yellow]{too_long} episodes' prompts do not fit the model's context (prompt_too_long): their groups "
            "were not stored; serve the model with a longer context, or leave those tasks out[/yellow]"
        )
    if refused := failures.pop("prompt_refused", 0):
        console.print(
            f"[yellow]the policy server refused {refused} episodes' first request (prompt_refused; the last: "
            f"{last.get('prompt_refused', '')[:300]}): their groups were not stored; check the server's "
            "options[/yellow]"
        )
    if failures:
        console.print(
            f"[yellow]episodes failed ({failures}) and their groups were not stored; infrastructure failures are "
            "retried by rerunning with --resume[/yellow]"
        )
    if json_path is not None:
        json_path.write_text(json.dumps(summary, indent=2))
