"""An episode as the one token sequence a trainer computes its loss on.

Every turn's ``Completion`` carries the ids its reply was conditioned on (``prompt_token_ids``)
and the ids it sampled (``token_ids``, with ``logprobs``). A multi-turn episode is one sequence
when each turn's prompt continues the previous turn's prompt and reply: the first turn's prompt,
then the model's tokens (``env_mask`` 1, trained on) and, between replies, what the environment
added (feedback, tool results, the chat template's turn markers: ``env_mask`` 0, logprob 0, never
trained on). An episode whose turns do not chain (a server that re-tokenized a reply differently,
a backend that gave no ids) raises ``TokenRecordError``: a trainer leaves it out rather than train
on tokens the model never produced.
"""

from __future__ import annotations

from dataclasses import dataclass

from dojo.agent.episode import Episode
from dojo.errors import DojoError


class TokenRecordError(DojoError):
    """An episode's turns do not form one token sequence (missing ids, or a prompt that does not
    continue the previous turn)."""


@dataclass(frozen=True)
class EpisodeTokens:
    """``prompt_ids`` then ``completion_ids``; ``logprobs`` and ``env_mask`` run along the completion."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]

    @property
    def model_tokens(self) -> int:
        return sum(self.env_mask)


def episode_tokens(ep: Episode) -> EpisodeTokens:
    """The token sequence of ``ep`` (raises ``TokenRecordError`` when its turns do not chain)."""
    if not ep.turns:
        raise TokenRecordError(f"episode {ep.episode_id} has no turns (the policy never replied)")
    prompt: list[int] | None = None
    sequence: list[int] = []
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    for turn in ep.turns:
        c = turn.completion
        if c.prompt_token_ids is None or c.token_ids is None:
            raise TokenRecordError(
                f"episode {ep.episode_id}, turn {turn.index}: the policy returned no token ids "
                "(serve it with vLLM's return_token_ids, or dojo policy serve)"
            )
        if c.logprobs is not None and len(c.logprobs) != len(c.token_ids):
            raise TokenRecordError(
                f"episode {ep.episode_id}, turn {turn.index}: {len(c.logprobs)} logprobs for {len(c.token_ids)} tokens"
            )
        if prompt is None:
            prompt = sequence = list(c.prompt_token_ids)
        elif c.prompt_token_ids[: len(sequence)] != sequence:
            raise TokenRecordError(
                f"episode {ep.episode_id}, turn {turn.index}: its prompt does not continue the earlier turns' "
                "tokens (the reply was re-tokenized differently)"
            )
        env = c.prompt_token_ids[len(sequence) :]
        completion += env + c.token_ids
        logprobs += [0.0] * len(env) + (c.logprobs if c.logprobs is not None else [0.0] * len(c.token_ids))
        mask += [0] * len(env) + [1] * len(c.token_ids)
        sequence = list(c.prompt_token_ids) + list(c.token_ids)
    assert prompt is not None
    return EpisodeTokens(prompt_ids=prompt, completion_ids=completion, logprobs=logprobs, env_mask=mask)
