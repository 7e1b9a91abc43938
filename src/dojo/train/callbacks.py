"""What ``dojo train`` does around each GRPO step: metrics (CSV), the progress bar, trajectories,
curriculum state in checkpoints, a checkpoint on Ctrl-C, and (``judge_agreement``) the judge's
agreement with the labels people have given so far."""

from __future__ import annotations

import csv
import json
import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from transformers import TrainerCallback

from dojo.agent.episode import Episode
from dojo.rewards.agreement import AgreementMonitor
from dojo.rollout.mirror import mirror_dir
from dojo.rollout.scheduler import Group
from dojo.rollout.store import TrajectoryStore
from dojo.tasks.curriculum import CurriculumSampler
from dojo.tasks.model import Task
from dojo.train.evaluate import EvalResult

CURRICULUM_FILE = "dojo_curriculum.json"
EVAL_STEPS_FILE = "eval-steps.csv"
METRIC_COLUMNS = [
    "step", "reward", "reward_std", "pass_rate", "turns", "fixed_later", "frac_reward_zero_std", "groups_informative",
    "groups_kept", "groups_failed", "curriculum_level", "entropy", "loss", "grad_norm", "learning_rate",
    "completion_length", "step_time", "wall_seconds",
]  # fmt: skip
AGREEMENT_COLUMNS = ["judge/agreement", "judge/agreement_kappa", "judge/agreement_items", "judge/agreement_alert"]
_DOJO_KEYS = (
    "pass_rate", "turns", "fixed_later", "groups_informative", "groups_kept", "groups_failed", "curriculum_level",
)  # fmt: skip
_LOG_KEYS = {
    "reward": "reward", "reward_std": "reward_std", "frac_reward_zero_std": "frac_reward_zero_std",
    "entropy": "entropy", "loss": "loss", "grad_norm": "grad_norm", "learning_rate": "learning_rate",
    "completion_length": "completions/mean_length", "step_time": "step_time",
}  # fmt: skip


class StepRecorder:
    """Receives every group of episodes the current step generated (``DojoRollout``'s ``on_groups``):
    the curriculum learns from each complete group, the episodes wait for the next checkpoint to
    reach the store, and the step's pass rate and turn counts go to the metrics."""

    def __init__(self, curriculum: CurriculumSampler | None) -> None:
        self.curriculum = curriculum
        self.pending: list[tuple[Task, list[Episode]]] = []
        self._episodes: list[Episode] = []

    def record(self, groups: list[Group]) -> None:
        for group in groups:
            self.pending.append((group.task, group.episodes))
            self._episodes.extend(group.episodes)
            if self.curriculum is not None and group.complete and group.task.id in self.curriculum.tasks:
                passes = [ep.passed for ep in group.episodes]
                self.curriculum.update(group.task.id, sum(passes) / len(passes))

    def take_metrics(self) -> dict[str, float | None]:
        """The step's pass rate (scored episodes), mean replies per episode, and the share of scored
        episodes that passed on a second reply or later (``fixed_later``); then forget the step."""
        episodes, self._episodes = self._episodes, []
        scored = [ep for ep in episodes if ep.scored]
        if not scored:
            return {"pass_rate": None, "turns": None, "fixed_later": None}
        passed = [ep for ep in scored if ep.passed]
        return {
            "pass_rate": len(passed) / len(scored),
            "turns": sum(len(ep.turns) for ep in scored) / len(scored),
            "fixed_later": sum(len(ep.turns) >= 2 for ep in passed) / len(scored),
        }


class DojoCallback(TrainerCallback):
    def __init__(
        self,
        out: Path,
        recorder: StepRecorder,
        store: TrajectoryStore,
        total_steps: int,
        quiet: bool,
        *,
        periodic_eval: Callable[[Any, Any], EvalResult] | None = None,
        eval_every: int = 0,
        mirror: str | None = None,
        agreement: AgreementMonitor | None = None,
    ) -> None:
        self.out = out
        self.agreement = agreement
        self.mirror = mirror
        self.periodic_eval = periodic_eval
        self.eval_every = eval_every
        self.recorder = recorder
        self.store = store
        self.total_steps = total_steps
        self.started = time.monotonic()
        self.interrupted = False
        self._previous_handler: Any = None
        self.progress: Progress | None = None
        self.task_id: Any = None
        self.quiet = quiet
        self.csv_path = out / "metrics.csv"
        self.first_step = 0

    # -- Ctrl-C -------------------------------------------------------------------------------
    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        if self.interrupted:  # a second Ctrl-C stops at once
            signal.signal(signal.SIGINT, self._previous_handler or signal.SIG_DFL)
            raise KeyboardInterrupt
        self.interrupted = True
        if self.progress is not None:
            self.progress.console.print("[yellow]Ctrl-C: saving a checkpoint after this step (again to abort)[/]")

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._previous_handler = signal.signal(signal.SIGINT, self._on_sigint)
        self.first_step = state.global_step
        if not self.quiet:
            self.progress = Progress(
                TextColumn("[bold]GRPO"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[stats]}"),
                TimeElapsedColumn(),
            )  # fmt: skip
            self.progress.start()
            self.task_id = self.progress.add_task("grpo", total=self.total_steps, completed=state.global_step, stats="")

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.progress is not None:
            self.progress.stop()
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.interrupted:
            control.should_save = True
            control.should_training_stop = True
        # Each step's trajectories reach the store as the step ends (``dojo dashboard`` follows them
        # live), so the ones a checkpoint covers are there before it; a resumed run drops any shard
        # newer than its checkpoint (see drop_newer_shards), so none is lost or doubled.
        if self.recorder.pending:
            self.store.write_groups(self.recorder.pending)
            self.recorder.pending = []
        step = state.global_step
        if (
            self.periodic_eval is not None
            and self.eval_every
            and step % self.eval_every == 0
            and step < state.max_steps
        ):
            self._evaluate(step, kwargs["model"], kwargs["processing_class"])

    def _evaluate(self, step: int, model: Any, tokenizer: Any) -> None:
        """Held-out reward during training (``eval.every``): a row of ``eval-steps.csv``."""
        assert self.periodic_eval is not None
        result = self.periodic_eval(model, tokenizer)
        path = self.out / EVAL_STEPS_FILE
        new = not path.exists()
        with path.open("a", newline="") as f:
            writer = csv.writer(f)
            if new:
                writer.writerow(["step", "mean_reward", "pass_rate", "greedy_pass"])
            writer.writerow([step, f"{result.mean_reward:.4f}", f"{result.pass_rate:.4f}", f"{result.greedy_pass:.4f}"])
        if self.progress is not None:
            self.progress.console.print(
                f"step {step}: held-out reward {result.mean_reward:.3f}, greedy pass {result.greedy_pass:.3f}"
            )

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if ckpt.is_dir() and self.recorder.curriculum is not None:
            (ckpt / CURRICULUM_FILE).write_text(json.dumps(self.recorder.curriculum.state_dict()))
        if self.mirror:
            mirror_dir(self.out, self.mirror)  # the checkpoint, metrics and trajectories so far

    # -- metrics -------------------------------------------------------------------------------
    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or "reward" not in logs:
            return
        row: dict[str, Any] = {"step": state.global_step, "wall_seconds": round(time.monotonic() - self.started, 2)}
        for col, key in _LOG_KEYS.items():
            if key in logs:
                row[col] = logs[key]
        for key in _DOJO_KEYS:
            if key in logs:
                row[key] = logs[key]
        if self.agreement is not None:
            row.update(self.agreement.check())  # rereads the labels given so far; warns on a drop
        new = not self.csv_path.exists()
        columns = METRIC_COLUMNS + (AGREEMENT_COLUMNS if self.agreement is not None else [])
        if not new:  # a resumed run appends under the header its file already has
            with self.csv_path.open(newline="") as f:
                columns = next(csv.reader(f), columns)
        with self.csv_path.open("a", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
            if new:
                writer.writeheader()
            writer.writerow(row)
        if self.progress is not None:
            elapsed = max(1e-9, time.monotonic() - self.started)
            done = state.global_step - self.first_step
            stats = (
                f"reward {_shown(row.get('reward'), '.3f')}  pass {_shown(row.get('pass_rate'), '.2f')}  "
                f"level {_shown(row.get('curriculum_level'), '.1f')}  {done / elapsed:.2f} steps/s"
            ) + _agreement_stats(row)
            self.progress.update(self.task_id, completed=state.global_step, stats=stats)


def _shown(value: Any, spec: str) -> str:
    """A figure of the progress line; "-" for one the step has not got (a step whose every episode
    was unscorable has no reward: its prompts all filled the model's context)."""
    return "-" if value is None else format(value, spec)


def _agreement_stats(row: dict[str, Any]) -> str:
    """The progress line's judge part: agreement on the items labelled so far, and the alert."""
    if "judge/agreement" not in row:
        return ""
    text = f"  judge {row['judge/agreement']:.2f} on {int(row['judge/agreement_items'])}"
    return text + ("  [bold red]JUDGE AGREEMENT LOW[/]" if row["judge/agreement_alert"] else "")


def drop_newer_shards(store: TrajectoryStore, step: int) -> int:
    """Delete trajectory shards holding steps after ``step`` (written before a crash that came
    before their checkpoint); returns how many were dropped."""
    dropped = 0
    for shard in store.shards():
        table = store.read_shard(shard, columns=["group_id"])
        steps = [int(g.split("/", 1)[0].removeprefix("step")) for g in table.column("group_id").to_pylist()]
        if steps and max(steps) > step:
            store.remove_shard(shard)
            dropped += 1
    return dropped
