"""Token-exact episodes: the in-process policy batches concurrent requests and continues a
conversation from the ids it sampled (never re-tokenized), and an episode's turns chain into the
one sequence a trainer takes its loss on."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from dojo.agent.episode import Episode, TurnRecord
from dojo.agent.hf_policy import HFPolicy, PromptFormat
from dojo.agent.policy import Completion, PolicyError, SamplingParams
from dojo.agent.tokens import TokenRecordError, episode_tokens

PROMPT = [{"role": "system", "content": "Write code."}, {"role": "user", "content": "double x"}]
FEEDBACK = {"role": "user", "content": "Your code did not pass the visible tests: f(2) == 4"}


def _episode(*completions: Completion) -> Episode:
    turns = [TurnRecord(index=i, completion=c) for i, c in enumerate(completions)]
    return Episode(
        episode_id="e#0", task_id="t", group_id="e", sample_index=0, status="answered", messages=PROMPT, turns=turns
    )


@pytest.mark.parametrize("prompt_format", ["chat", "text"])
async def test_a_continued_conversation_keeps_the_sampled_ids(
    tiny_model_dir: Path, prompt_format: PromptFormat
) -> None:
    policy = HFPolicy.from_dir(tiny_model_dir, prompt_format=prompt_format)
    params = SamplingParams(max_tokens=16, temperature=1.0, seed=3)
    firsts = await policy.generate(PROMPT, params, n=8)
    retokenized_differs = False
    for first in firsts:
        messages: list[dict[str, Any]] = [*PROMPT, {"role": "assistant", "content": first.text}, FEEDBACK]
        (second,) = await policy.generate(messages, params)
        assert first.prompt_token_ids is not None and first.token_ids is not None
        assert second.prompt_token_ids is not None
        head = first.prompt_token_ids + first.token_ids
        assert second.prompt_token_ids[: len(head)] == head
        tokens = episode_tokens(_episode(first, second))
        assert tokens.prompt_ids == first.prompt_token_ids
        model_ids = [t for t, m in zip(tokens.completion_ids, tokens.env_mask, strict=True) if m]
        assert model_ids == first.token_ids + (second.token_ids or [])
        env = policy.tokenizer.decode([t for t, m in zip(tokens.completion_ids, tokens.env_mask, strict=True) if not m])
        assert FEEDBACK["content"] in env
        retokenized_differs |= policy._encode(policy.render(messages))[: len(head)] != head
    # the random model writes bytes that are no valid UTF-8: decoding and re-encoding its reply would
    # give other ids, which is what the policy's memory of its replies avoids
    assert retokenized_differs


async def test_concurrent_requests_run_as_one_batch(tiny_model_dir: Path) -> None:
    policy = HFPolicy.from_dir(tiny_model_dir)
    calls = []
    generate = policy.model.generate

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs["input_ids"].shape[0])
        return generate(*args, **kwargs)

    policy.model.generate = counting
    params = SamplingParams(max_tokens=6)
    prompts = [[{"role": "user", "content": "x" * (i + 1)}] for i in range(12)]
    results = await asyncio.gather(*(policy.generate(p, params, n=2) for p in prompts))
    assert calls == [24]  # 12 conversations of different lengths, 2 samples each, one forward pass per token
    for p, result in zip(prompts, results, strict=True):
        assert len(result) == 2
        assert all(c.prompt_token_ids == policy._encode(policy.render(p)) for c in result)
    greedy = await asyncio.gather(*(policy.generate(p, SamplingParams(max_tokens=6, temperature=0.0)) for p in prompts))
    assert calls == [24, 12] and all(len(g) == 1 for g in greedy)  # other sampling settings: another batch


async def test_a_failed_batch_fails_its_requests_and_the_next_one_runs(tiny_model_dir: Path) -> None:
    policy = HFPolicy.from_dir(tiny_model_dir)
    generate = policy.model.generate

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA error: out of memory")

    policy.model.generate = broken
    results = await asyncio.gather(
        *(policy.generate(PROMPT, SamplingParams(max_tokens=4)) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, PolicyError) and "out of memory" in str(r) for r in results)
    policy.model.generate = generate
    (ok,) = await policy.generate(PROMPT, SamplingParams(max_tokens=4))
    assert ok.token_ids


def test_turns_that_do_not_chain_are_an_error() -> None:
    first = Completion(text="a", token_ids=[7, 8], logprobs=[-0.5, -0.25], prompt_token_ids=[1, 2, 3])
    second = Completion(text="b", token_ids=[9], logprobs=[-1.0], prompt_token_ids=[1, 2, 3, 7, 8, 4, 5])
    tokens = episode_tokens(_episode(first, second))
    assert tokens.prompt_ids == [1, 2, 3]
    assert tokens.completion_ids == [7, 8, 4, 5, 9]
    assert tokens.env_mask == [1, 1, 0, 0, 1] and tokens.logprobs == [-0.5, -0.25, 0.0, 0.0, -1.0]
    retokenized = second.model_copy(update={"prompt_token_ids": [1, 2, 3, 78, 4, 5]})
    with pytest.raises(TokenRecordError, match="does not continue"):
        episode_tokens(_episode(first, retokenized))
    with pytest.raises(TokenRecordError, match="no token ids"):
        episode_tokens(_episode(Completion(text="a", token_ids=[7])))
    with pytest.raises(TokenRecordError, match="no turns"):
        episode_tokens(_episode())
    with pytest.raises(TokenRecordError, match="2 logprobs for 1 tokens"):
        episode_tokens(_episode(first.model_copy(update={"token_ids": [7]})))


def test_bad_settings_are_clear_errors(tiny_model_dir: Path) -> None:
    policy = HFPolicy.from_dir(tiny_model_dir)
    with pytest.raises(ValueError, match="prompt_format"):
        HFPolicy(policy.model, policy.tokenizer, prompt_format="xml")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_window"):
        HFPolicy(policy.model, policy.tokenizer, batch_window=-1)
