"""An episode's turns as process-reward signals (``dojo.rewards.process``), and the scorer an
``EpisodeRunner`` takes (``process=ProcessScorer(...)``) to give each turn its reward
(the verl agent loop, ``dojo.integrations.verl``, takes the same scorer on its turns' records).

What each turn did is read from its record: the visible tests' result (``run_tests`` or the
feedback check: ``<verdict>: <passed>/<total> tests passed``), its tool calls (as ``name`` +
arguments; a result with an error or failing tests is a failed action) and the malformed ones
(``invalid``: not JSON, no name, arguments not an object).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from dojo.agent.episode import Episode, TurnRecord
from dojo.rewards.judge_prompt import question_of
from dojo.rewards.process import ProcessRewardConfig, ProcessRewardModel, StepSignal, turn_rewards
from dojo.tasks.model import Task

TESTS_LINE = re.compile(r"^\w+: (\d+)/(\d+) tests passed", re.MULTILINE)


def step_signal(turn: TurnRecord) -> StepSignal:
    passed = total = None
    actions, failed, malformed = [], False, 0
    calls = turn.tool_results
    for result in calls:
        if result.call.name == "invalid":
            malformed += 1
            continue
        key = json.dumps([result.call.name, result.call.arguments], sort_keys=True)
        actions.append(key)
        if (m := TESTS_LINE.search(result.observation)) is not None:
            passed, total = int(m.group(1)), int(m.group(2))
            failed = failed or passed < total
        elif result.verdict not in (None, "accepted", "pass") or result.observation.startswith("error"):
            failed = True
    if not calls:  # a plain reply is its own action
        actions.append(json.dumps(["reply", turn.completion.text.strip()]))
    return StepSignal(turn.completion.text, passed, total, tuple(actions), failed, malformed)


class ProcessScorer:
    """Per-turn rewards of finished episodes: the signals, plus a process reward model's step scores."""

    def __init__(self, config: ProcessRewardConfig | None = None, prm: ProcessRewardModel | None = None) -> None:
        self.config = config or ProcessRewardConfig()
        self.prm = prm

    async def score(self, task: Task, episode: Episode) -> list[dict[str, float]]:
        return await self.score_turns(task, episode.turns)

    async def score_turns(self, task: Task, turns: Sequence[TurnRecord]) -> list[dict[str, float]]:
        """Each turn's reward parts and ``total``, from the turns' records (the episode runner's, or
        the verl agent loop's, which records its turns the same way)."""
        steps = [step_signal(t) for t in turns]
        prm_scores = None
        if self.prm is not None and self.config.prm_weight and steps:
            prm_scores = await self.prm.score_steps(question_of(task.prompt), [s.text for s in steps])
        return turn_rewards(steps, self.config, prm_scores)
