"""An episode's turns as process-reward signals (``dojo.rewards.process``), and the scorer an
``EpisodeRunner`` takes (``process=ProcessScorer(...)``) to give each turn its reward
(the verl agent loop, ``dojo.integrations.verl``, takes the same scorer on its turns' records).

What each turn did is read from its record: the visible tests' result (``run_tests`` or the
feedback check: the counts the grader made, ``ToolResult.tests_passed``/``tests_total``, never the
text of an observation, which a program's own output can imitate), its tool calls (as ``name`` +
arguments; an error, a run that was not accepted or failing tests is a failed action, the
sandbox's own failure is not) and the malformed ones (``invalid``: not JSON, no name, arguments not
an object).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from dojo.agent.episode import Episode, TurnRecord
from dojo.rewards.judge_prompt import question_of
from dojo.rewards.mapping import SHOWN_ONLY
from dojo.rewards.process import ProcessRewardConfig, ProcessRewardModel, StepSignal, turn_rewards
from dojo.sandbox import Verdict
from dojo.tasks.model import Task

SUCCEEDED = (None, Verdict.ACCEPTED.value, "pass")  # a run accepted, a grade that passed, or no verdict


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
        if result.tests_total is not None and result.tests_passed is not None:
            passed, total = result.tests_passed, result.tests_total
            failed = failed or passed < total
        elif result.infra_error is None and (result.verdict not in SUCCEEDED or result.observation.startswith("error")):
            failed = True  # (a sandbox that failed is ours, not the policy's: no penalty)
    if not calls:  # a plain reply is its own action
        actions.append(json.dumps(["reply", turn.completion.text.strip()]))
    return StepSignal(turn.completion.text, passed, total, tuple(actions), failed, malformed)


class ProcessScorer:
    """Per-turn rewards of finished episodes: the signals, plus a process reward model's step scores."""

    def __init__(self, config: ProcessRewardConfig | None = None, prm: ProcessRewardModel | None = None) -> None:
        self.config = config or ProcessRewardConfig()
        self.prm = prm

    async def score(self, task: Task, episode: Episode) -> list[dict[str, float]]:
        verdict = episode.reward.verdict if episode.reward is not None else None
        flags = episode.reward.flags if episode.reward is not None else []
        return await self.score_turns(task, episode.turns, verdict, flags)

    async def score_turns(
        self, task: Task, turns: Sequence[TurnRecord], verdict: str | None = None, flags: Sequence[str] = ()
    ) -> list[dict[str, float]]:
        """Each turn's reward parts and ``total``, from the turns' records (the episode runner's, or
        the verl agent loop's, which records its turns the same way). ``verdict`` and ``flags``: the
        episode's grade; one the grader called a hack earns no turn anything (its visible checks,
        which run without the static scan, paid progress to the hack on the way), and one whose
        only passes were the examples the prompt shows (``SHOWN_ONLY``) earns no progress: that
        progress is what a table of the examples earns (1.0 over the episode, where its grade is 0)."""
        if verdict == "hack":
            return [{"total": 0.0} for _ in turns]
        steps = [step_signal(t) for t in turns]
        if SHOWN_ONLY in flags:
            steps = [dataclasses.replace(s, passed=None, total=None) for s in steps]
        prm_scores = None
        if self.prm is not None and self.config.prm_weight and steps:
            prm_scores = await self.prm.score_steps(question_of(task.prompt), [s.text for s in steps])
        return turn_rewards(steps, self.config, prm_scores)
