"""Several servers of one policy as one: ``PolicyPool`` (least requests, sticky turns, failover).

    pool = PolicyPool([OpenAIPolicy(url) for url in urls])
    completions = await pool.generate(messages, params)

- Routing: the server with the fewest requests in flight; the later turns of a conversation go back
  to the server that answered its earlier turns (its prefix cache holds them) unless that server
  has ``sticky_slack`` more requests in flight than the least busy one.
- Failover: a server that fails a request (``PolicyError``: refused, timed out, 5xx) is benched
  for ``cooldown`` seconds and the request is retried at once on another one; only when every
  server failed does the caller get a ``PolicyError`` (which an episode reports as unscored, never
  as a reward).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dojo.agent.policy import Completion, Policy, PolicyError, RequestRefused, SamplingParams
from dojo.agent.weight_sync import server_root
from dojo.errors import InputError

STICKY_CONVERSATIONS = 100_000  # remembered conversation heads (LRU)


@dataclass(eq=False)
class PoolMember:
    policy: Policy
    name: str
    inflight: int = 0
    requests: int = 0
    failures: int = 0
    benched_until: float = 0.0
    last_error: str = ""
    stale: bool = False  # it failed to load the trainer's latest weights: it gets nothing until it does

    def benched(self, now: float) -> bool:
        return now < self.benched_until


class PolicyPool:
    """A ``Policy`` over several servers of the same model (see the module doc)."""

    def __init__(self, policies: Sequence[Policy], *, cooldown: float = 10.0, sticky_slack: int = 2) -> None:
        if not policies:
            raise InputError("a policy pool needs at least one policy server")
        if cooldown < 0 or sticky_slack < 0:
            raise InputError("cooldown and sticky_slack must not be negative")
        self.members = [PoolMember(p, str(getattr(p, "base_url", f"policy-{i}"))) for i, p in enumerate(policies)]
        self.cooldown = cooldown
        self.sticky_slack = sticky_slack
        self.failovers = 0
        self._sticky: OrderedDict[str, PoolMember] = OrderedDict()

    async def model_name(self) -> str:
        """The model the servers serve. A server that does not answer is benched (and said so in
        ``stats``); a PolicyError when none answers or two serve different models."""
        names: dict[str, str] = {}
        errors: list[str] = []
        for m in self.members:
            ask = getattr(m.policy, "model_name", None)
            if ask is None:
                continue
            try:
                names[m.name] = await ask()
            except PolicyError as e:
                m.failures += 1
                m.benched_until = time.monotonic() + self.cooldown
                m.last_error = str(e)
                errors.append(str(e))
        if errors and not names and len(errors) == len(self.members):
            raise PolicyError("no policy server of the pool answers: " + "; ".join(errors))
        if len(set(names.values())) > 1:
            raise PolicyError(f"the policy servers serve different models: {names}; give servers of one model")
        return next(iter(names.values()), "")

    def _choose(self, head: str, tried: set[int]) -> PoolMember | None:
        now = time.monotonic()
        candidates = [m for m in self.members if id(m) not in tried and not m.stale]
        up = [m for m in candidates if not m.benched(now)] or candidates  # all benched: try them anyway
        if not up:
            return None
        least = min(up, key=lambda m: m.inflight)
        stuck = self._sticky.get(head)
        if stuck is not None and stuck in up and stuck.inflight <= least.inflight + self.sticky_slack:
            return stuck
        return least

    async def generate(
        self,
        messages: list[dict[str, Any]],
        params: SamplingParams,
        *,
        n: int = 1,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[Completion]:
        head = _conversation_head(messages)
        tried: set[int] = set()
        errors: list[str] = []
        while (member := self._choose(head, tried)) is not None:
            tried.add(id(member))
            member.inflight += 1
            member.requests += 1
            try:
                out = await member.policy.generate(messages, params, n=n, tools=tools)
            except RequestRefused:  # (the request's content: another server of the model refuses it too)
                raise
            except PolicyError as e:
                member.failures += 1
                member.benched_until = time.monotonic() + self.cooldown
                member.last_error = str(e)
                errors.append(f"{member.name}: {e}")
                self.failovers += 1
                continue
            finally:
                member.inflight -= 1
            self._sticky[head] = member
            self._sticky.move_to_end(head)
            if len(self._sticky) > STICKY_CONVERSATIONS:
                self._sticky.popitem(last=False)
            return out
        raise PolicyError("every policy server failed this request: " + "; ".join(errors))

    def only(self, servers: Iterable[str]) -> None:
        """Send requests only to ``servers`` (URLs, with or without ``/v1``): those that hold the
        trainer's latest weights (``ServedWeights.loaded``)."""
        keep = {server_root(s) for s in servers}
        for m in self.members:
            m.stale = server_root(m.name) not in keep

    def stats(self) -> list[dict[str, Any]]:
        now = time.monotonic()
        return [
            {"server": m.name, "inflight": m.inflight, "requests": m.requests, "failures": m.failures,
             "benched": m.benched(now), "stale": m.stale, "last_error": m.last_error or None}
            for m in self.members
        ]  # fmt: skip

    async def close(self) -> None:
        for m in self.members:
            close = getattr(m.policy, "close", None)
            if close is not None:
                await close()


def _conversation_head(messages: list[dict[str, Any]]) -> str:
    """What identifies a conversation across its turns: its messages up to the first reply."""
    head: list[Any] = []
    for m in messages:
        if m.get("role") == "assistant":
            break
        head.append([m.get("role"), m.get("content")])
    return hashlib.blake2b(json.dumps(head, default=str).encode(), digest_size=16).hexdigest()
