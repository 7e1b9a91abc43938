"""Token-level multi-turn rollouts: what a chat template puts between two model replies.

A trainer that appends a feedback turn to a token sequence (rather than re-rendering the whole
conversation) needs exactly the text the chat template would render there. Used by the TRL
``rollout_func`` (``dojo.integrations.trl_rollout``) and the verl agent loop.
"""

from __future__ import annotations

from typing import Any


def feedback_turn_suffix(tokenizer: Any, messages: list[dict[str, Any]], *, ended_with_eos: bool) -> str:
    """What the chat template puts between the model's last reply and its next one: the end of the
    assistant turn, the feedback user turn and the generation prompt. ``messages`` ends with
    (assistant reply, user feedback)."""
    before, reply = messages[:-2], messages[-2]
    opened: str = tokenizer.apply_chat_template(before, add_generation_prompt=True, tokenize=False)
    closed: str = tokenizer.apply_chat_template([*before, reply], tokenize=False)
    full: str = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    head = opened + reply["content"]
    if not (closed.startswith(head) and full.startswith(closed)):
        raise ValueError(
            "the tokenizer's chat template does not render earlier turns the same when more follow "
            "(not prefix-preserving), so feedback turns cannot be appended token by token; use a "
            "ChatML-style template"
        )
    close = closed[len(head) :]
    eos = tokenizer.eos_token or ""
    if ended_with_eos and eos and close.startswith(eos):
        close = close[len(eos) :]
    return str(close + full[len(closed) :])
