"""Runs with judged items, for spot-check tests and benches: episodes written to a trajectory store."""

from __future__ import annotations

import json
from pathlib import Path

from dojo.agent.episode import Episode
from dojo.rewards.outcome import Reward
from dojo.rewards.review import Label
from dojo.rollout.store import TrajectoryStore, episode_row
from dojo.tasks.model import Task, TaskMetadata


def judged_store(path: Path, texts: list[str], rewards: list[Reward]) -> TrajectoryStore:
    """A store holding one episode per text, graded by ``rewards``."""
    store = TrajectoryStore(str(path), run_id="judged")
    task = Task(id="essay", form="answer", prompt="Explain it.", reference="x", metadata=TaskMetadata(source="t"))
    rows = []
    for i, (text, reward) in enumerate(zip(texts, rewards, strict=True)):
        messages = [{"role": "user", "content": f"Explain item {i}."}, {"role": "assistant", "content": text}]
        ep = Episode(
            episode_id=f"essay#{i}",
            task_id="essay",
            group_id="essay",
            sample_index=i,
            status="answered",
            messages=messages,
            final=text,
            reward=reward,
        )
        rows.append(episode_row(ep, task, store.run_id))
    store.write(rows)
    return store


def write_labels(path: Path, labels: list[Label]) -> Path:
    path.write_text("".join(json.dumps(lab.model_dump()) + "\n" for lab in labels))
    return path
