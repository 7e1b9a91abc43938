"""The end-of-run report: held-out results before and after GRPO (a table, in Markdown and JSON)
and the reward curve (PNG) drawn from ``metrics.csv``."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from rich.table import Table

from dojo.train.config import TrainConfig
from dojo.train.evaluate import EvalResult

ROWS = [
    ("held-out mean reward (sampled)", "mean_reward"),
    ("held-out pass rate (sampled)", "pass_rate"),
    ("held-out pass rate (greedy)", "greedy_pass"),
]


def report_rows(before: EvalResult, after: EvalResult) -> list[tuple[str, float, float]]:
    """``(label, before, after)`` for every figure of the report; multi-turn runs add the pass rate
    within each number of replies and the share fixed on a later reply."""
    rows = [(label, float(getattr(before, key)), float(getattr(after, key))) for label, key in ROWS]
    turns = min(len(before.pass_by_turn), len(after.pass_by_turn))
    if turns > 1:
        for t in range(turns):
            label = f"held-out pass within {t + 1} repl{'y' if t == 0 else 'ies'} (sampled)"
            rows.append((label, before.pass_by_turn[t], after.pass_by_turn[t]))
        rows.append(("held-out share fixed on reply 2 or later", before.fixed_later, after.fixed_later))
        rows.append(("held-out replies per episode", before.mean_turns, after.mean_turns))
    return rows


def report_table(before: EvalResult, after: EvalResult) -> Table:
    table = Table(title=f"held-out: {before.tasks} tasks × {before.samples} samples")
    for col in ("", "before GRPO", "after GRPO", "change"):
        table.add_column(col, justify="right" if col else "left")
    for label, b, a in report_rows(before, after):
        table.add_row(label, f"{b:.3f}", f"{a:.3f}", f"{a - b:+.3f}")
    return table


def read_metrics(path: Path) -> list[dict[str, float]]:
    if not path.is_file():
        return []
    rows = []
    with path.open() as f:
        for row in csv.DictReader(f):
            rows.append({k: float(v) for k, v in row.items() if v not in ("", None)})
    return rows


def reward_curve(metrics: list[dict[str, float]], before: EvalResult, after: EvalResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    steps = [m["step"] for m in metrics if "reward" in m]
    rewards = [m["reward"] for m in metrics if "reward" in m]
    if steps:
        ax.plot(steps, rewards, color="#9ab", linewidth=0.8, label="training reward (per step)")
        window = max(1, len(rewards) // 20)
        smooth = [sum(rewards[max(0, i - window + 1) : i + 1]) / len(rewards[max(0, i - window + 1) : i + 1])
                  for i in range(len(rewards))]  # fmt: skip
        ax.plot(steps, smooth, color="#135", linewidth=2, label=f"training reward ({window}-step mean)")
    last = steps[-1] if steps else 1
    ax.scatter([0, last], [before.mean_reward, after.mean_reward], color="#d40", zorder=3, label="held-out reward")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("reward")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write_report(out: Path, config: TrainConfig, before: EvalResult, after: EvalResult, steps: int) -> None:
    metrics = read_metrics(out / "metrics.csv")
    reward_curve(metrics, before, after, out / "reward_curve.png")
    lines = [
        "# dojo train report",
        "",
        f"- tasks: `{config.tasks.source}`, model: `{config.policy.model}`, seed {config.seed}",
        f"- warm start: {config.warm_start.steps} steps ({config.warm_start.demonstrations}); GRPO: {steps} steps of "
        f"{config.grpo.prompts_per_step} groups × {config.grpo.group_size}",
        f"- episodes: `{config.episode.mode}`"
        + (f", up to {config.episode.max_turns} replies" if config.episode.mode != "single" else ""),
        f"- held-out: {before.tasks} tasks never trained on, {before.samples} samples each at temperature "
        f"{config.grpo.temperature}",
        "",
        "| | before GRPO | after GRPO | change |",
        "|---|---:|---:|---:|",
    ]
    for label, b, a in report_rows(before, after):
        lines.append(f"| {label} | {b:.3f} | {a:.3f} | {a - b:+.3f} |")
    lines += ["", "![reward curve](reward_curve.png)", ""]
    (out / "report.md").write_text("\n".join(lines))
    data = {"steps": steps, "before": before.model_dump(), "after": after.model_dump(), "seed": config.seed}
    (out / "report.json").write_text(json.dumps(data, indent=2))
