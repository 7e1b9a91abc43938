"""Token-level multi-turn rollouts: what a chat template puts between two model replies.

A policy or trainer that appends later turns to a token sequence (rather than re-rendering the whole
conversation) needs exactly the text the chat template would render there. Used by the in-process
policy (``dojo.agent.hf_policy``) and the verl agent loop.
"""

from __future__ import annotations

from typing import Any


def text_after_reply(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    reply_index: int,
    *,
    ended_with_eos: bool,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """What the chat template puts after the reply ``messages[reply_index]`` up to the next reply:
    the end of the assistant turn, every message after it and the generation prompt (without the
    EOS when the reply's own tokens ended with it)."""
    kwargs: dict[str, Any] = {"tools": tools} if tools else {}
    before, reply = messages[:reply_index], messages[reply_index]
    opened: str = tokenizer.apply_chat_template(before, add_generation_prompt=True, tokenize=False, **kwargs)
    closed: str = tokenizer.apply_chat_template([*before, reply], tokenize=False, **kwargs)
    full: str = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False, **kwargs)
    head = opened + str(reply.get("content") or "")
    if not (closed.startswith(head) and full.startswith(closed)):
        raise ValueError(
            "the tokenizer's chat template does not render earlier turns the same when more follow "
            "(not prefix-preserving), so later turns cannot be appended token by token; use a "
            "ChatML-style template"
        )
    rest = full[len(head) :]
    eos = tokenizer.eos_token or ""
    if ended_with_eos and eos and rest.startswith(eos):
        rest = rest[len(eos) :]
    return rest
