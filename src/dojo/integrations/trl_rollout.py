"""dojo's multi-turn episodes as a TRL ``rollout_func`` (``GRPOTrainer(rollout_func=...)``).

Each prompt becomes one feedback episode, generated with the trainer's own model: the model writes
code, dojo checks it against the task's *visible* tests in the sandbox, and if some fail the
failures go back as a user turn (code → run → error → fix), up to ``max_turns`` replies. The last
reply is graded on every test, hidden ones included.

TRL receives the whole episode as one completion: the model's tokens (``env_mask`` 1, trained on)
and the feedback turns between them (``env_mask`` 0, environment tokens, never trained on), the
logprob of each sampled token, and the reward as the extra field ``dojo_reward``, which
``episode_reward`` hands to TRL as a reward function. A sandbox failure in an episode gives
``None`` (left out of the reward), never 0.

    rollout = DojoRollout(tasks, max_turns=2)
    trainer = GRPOTrainer(model, reward_funcs=episode_reward, rollout_func=rollout,
                          train_dataset=Dataset.from_list(task_rows(tasks, chat=True)), args=args)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dojo.agent.chat_turns import feedback_turn_suffix
from dojo.agent.feedback import feedback_step
from dojo.agent.tools import Toolbox
from dojo.integrations.event_loops import SANDBOXES, BackgroundLoop
from dojo.rewards import Grader, GradingConfig
from dojo.rewards.config import DEFAULT_GRADING
from dojo.tasks.model import Task


def episode_reward(
    prompts: Sequence[Any], completions: Sequence[Any], dojo_reward: Sequence[float | None] | None = None, **_: Any
) -> list[float | None]:
    """The reward ``DojoRollout`` computed for each episode (pass it as ``reward_funcs``)."""
    if dojo_reward is None:
        raise ValueError("no `dojo_reward` field: episode_reward scores rollouts of dojo's DojoRollout only")
    if len(dojo_reward) != len(completions):
        raise ValueError(f"{len(dojo_reward)} episode rewards for {len(completions)} completions")
    return list(dojo_reward)


def _prompt_key(prompt: Any) -> str:
    return prompt if isinstance(prompt, str) else json.dumps(prompt, sort_keys=True)


@dataclass
class _Episode:
    task: Task
    prompt: Any
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    final: str = ""
    turns: int = 0
    done: bool = False
    infra_error: str | None = None
    reward: float | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)

    def add(self, ids: list[int], logprobs: list[float], from_model: bool) -> None:
        self.completion_ids += ids
        self.logprobs += logprobs
        self.env_mask += [int(from_model)] * len(ids)


class DojoRollout:
    """A ``rollout_func``: runs dojo feedback episodes with the trainer's model.

    ``tasks``: the tasks of the dataset; each prompt is looked up by its text (or its messages).
    ``max_turns``: model replies per episode (1 is single-turn). ``max_feedback_tokens``: cut of
    each feedback turn. Sampling follows the trainer (temperature, top-p, top-k, and
    ``max_completion_length`` tokens per reply).
    """

    def __init__(
        self,
        tasks: Iterable[Task],
        *,
        max_turns: int = 2,
        max_feedback_tokens: int = 256,
        grading: GradingConfig = DEFAULT_GRADING,
        pool_size: int = 2,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        if max_feedback_tokens < 16:
            raise ValueError(f"max_feedback_tokens must be at least 16, got {max_feedback_tokens}")
        self.tasks: dict[str, Task] = {}
        for t in tasks:
            self.tasks[_prompt_key(t.prompt_text())] = t
            self.tasks[_prompt_key(t.messages())] = t
        if not self.tasks:
            raise ValueError("DojoRollout needs the dataset's tasks (the prompts are looked up among them)")
        self.max_turns = max_turns
        self.max_feedback_tokens = max_feedback_tokens
        self.grading = grading
        self.pool_size = pool_size
        self.last_episodes: list[dict[str, Any]] = []
        self._loop = BackgroundLoop("dojo-rollout")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_loop")
        state["last_episodes"] = []
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._loop = BackgroundLoop("dojo-rollout")

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        tokenizer = trainer.processing_class
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor's inner tokenizer
        episodes = [self._start(p, tokenizer) for p in prompts]
        model = trainer.accelerator.unwrap_model(trainer.model)
        for turn in range(self.max_turns):
            active = [e for e in episodes if not e.done]
            if not active:
                break
            self._generate(model, tokenizer, active, trainer)
            last = turn + 1 == self.max_turns
            self._loop.run(self._check(active, last))
            for e in active:
                if not e.done:
                    self._feedback(e, tokenizer)
        self._loop.run(self._grade(episodes))
        self.last_episodes = [
            {"task_id": e.task.id, "turns": e.turns, "final": e.final, "reward": e.reward, "error": e.infra_error}
            for e in episodes
        ]
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [e.env_mask for e in episodes],
            "dojo_reward": [e.reward for e in episodes],
            "dojo_turns": [e.turns for e in episodes],
        }

    def close(self) -> None:
        if self._loop.started:
            self._loop.run(SANDBOXES.close())
        self._loop.stop()

    # -- one episode --------------------------------------------------------------------------

    def _start(self, prompt: Any, tokenizer: Any) -> _Episode:
        task = self.tasks.get(_prompt_key(prompt))
        if task is None:
            raise KeyError(
                "a prompt is not among the tasks DojoRollout was built with; build the dataset with "
                "dojo.integrations.trl.task_rows(tasks) from the same tasks"
            )
        if isinstance(prompt, str):
            text = prompt
            messages: list[dict[str, Any]] = []
        else:
            messages = [dict(m) for m in prompt]
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        return _Episode(task=task, prompt=prompt, prompt_ids=list(ids), messages=messages)

    def _generate(self, model: Any, tokenizer: Any, episodes: list[_Episode], trainer: Any) -> None:
        import torch

        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        seqs = [e.prompt_ids + e.completion_ids for e in episodes]
        width = max(len(s) for s in seqs)
        input_ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs], device=model.device)
        attention = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs], device=model.device)
        temperature = float(trainer.temperature)
        gen: dict[str, Any] = {
            "max_new_tokens": int(trainer.max_completion_length),
            "do_sample": True,
            "temperature": temperature,
            "top_p": float(trainer.top_p),
            "top_k": int(trainer.top_k or 0),
            "return_dict_in_generate": True,
            "output_logits": True,
            "pad_token_id": pad,
            "eos_token_id": tokenizer.eos_token_id,
        }
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                out = model.generate(input_ids=input_ids, attention_mask=attention, **gen)
        finally:
            model.train(was_training)
        chosen = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float() / temperature
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
        for i, e in enumerate(episodes):
            ids, lps = chosen[i].tolist(), logprobs[i].tolist()
            kept = len(ids)
            for j, tok in enumerate(ids):
                if tok == tokenizer.eos_token_id:
                    kept = j + 1
                    break
                if tok == pad:
                    kept = j
                    break
            e.add(ids[:kept], lps[:kept], from_model=True)
            e.final = tokenizer.decode(ids[:kept], skip_special_tokens=True)
            e.turns += 1

    async def _check(self, episodes: list[_Episode], last: bool) -> None:
        """Visible tests of each reply: an episode ends when they pass, on its last turn, or when the
        task has none; otherwise its observation waits in ``e.messages`` for the feedback turn."""
        import asyncio

        sandbox = await SANDBOXES.get(self.pool_size)

        async def one(e: _Episode) -> None:
            step = await feedback_step(Toolbox(e.task, sandbox, limits=self.grading.limits), e.final, last_turn=last)
            e.done = step.done
            if step.outcome == "infra_error":
                e.infra_error = step.error
            if step.message is not None:
                e.messages.append({"role": "assistant", "content": e.final})
                e.messages.append(step.message)

        await asyncio.gather(*(one(e) for e in episodes))

    def _feedback(self, e: _Episode, tokenizer: Any) -> None:
        """Append the feedback turn as environment tokens (``env_mask`` 0, logprob 0)."""
        feedback = e.messages[-1]["content"]
        if isinstance(e.prompt, str):
            text = f"\n\n{feedback}\n\n"
        else:
            text = feedback_turn_suffix(
                tokenizer, e.messages, ended_with_eos=e.completion_ids[-1:] == [tokenizer.eos_token_id]
            )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if len(ids) > self.max_feedback_tokens:  # keep the head of the feedback and the generation prompt
            keep_tail = min(16, self.max_feedback_tokens // 4)
            ids = ids[: self.max_feedback_tokens - keep_tail] + ids[-keep_tail:]
        e.add(ids, [0.0] * len(ids), from_model=False)

    async def _grade(self, episodes: list[_Episode]) -> None:
        sandbox = await SANDBOXES.get(self.pool_size)
        grader = Grader(sandbox, self.grading)
        pending = [e for e in episodes if e.infra_error is None]
        rewards = await grader.grade_many([(e.task, e.final) for e in pending])
        for e, r in zip(pending, rewards, strict=True):
            e.reward = r.value
            if r.value is None:
                e.infra_error = r.error or "the sandbox failed while grading"
