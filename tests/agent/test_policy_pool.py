"""The policy pool: least requests, turns that stick to their server, failover from a dead server."""

from __future__ import annotations

import asyncio
import socket

import pytest

from dojo.agent.policy import OpenAIPolicy, PolicyError, SamplingParams
from dojo.agent.policy_pool import PolicyPool
from dojo.errors import InputError
from tests.agent.scripted import ScriptedPolicy

PARAMS = SamplingParams(max_tokens=8)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _named(name: str, delay: float = 0.0) -> ScriptedPolicy:
    return ScriptedPolicy(lambda _m, _i: name, delay=delay)


async def test_requests_go_to_the_least_busy_server() -> None:
    a, b = _named("a", delay=0.05), _named("b", delay=0.05)
    pool = PolicyPool([a, b])
    replies = await asyncio.gather(*(pool.generate([{"role": "user", "content": f"q{i}"}], PARAMS) for i in range(20)))
    texts = [r[0].text for r in replies]
    assert texts.count("a") == 10 and texts.count("b") == 10
    assert a.max_active <= 10 and b.max_active <= 10


async def test_later_turns_stick_to_the_server_of_the_first() -> None:
    a, b = _named("a"), _named("b")
    pool = PolicyPool([a, b])
    first = [{"role": "user", "content": "task"}]
    server = (await pool.generate(first, PARAMS))[0].text
    turn2 = [*first, {"role": "assistant", "content": server}, {"role": "user", "content": "tests failed"}]
    for _ in range(5):
        assert (await pool.generate(turn2, PARAMS))[0].text == server


async def test_a_dead_server_fails_over_and_only_all_dead_is_an_error() -> None:
    dead = OpenAIPolicy(f"http://127.0.0.1:{_closed_port()}/v1", "tiny", timeout=5)
    live = _named("live")
    pool = PolicyPool([dead, live], cooldown=60)
    for i in range(6):
        out = await pool.generate([{"role": "user", "content": f"q{i}"}], PARAMS)
        assert out[0].text == "live"  # a request the dead server took was retried on the live one
    stats = {s["server"]: s for s in pool.stats()}
    assert stats[dead.base_url]["failures"] == 1 and stats[dead.base_url]["benched"]  # benched after one failure
    assert pool.failovers == 1

    all_dead = PolicyPool([dead, OpenAIPolicy(f"http://127.0.0.1:{_closed_port()}/v1", "tiny", timeout=5)])
    with pytest.raises(PolicyError, match="every policy server failed"):
        await all_dead.generate([{"role": "user", "content": "q"}], PARAMS)
    with pytest.raises(PolicyError, match="no policy server of the pool answers"):
        await PolicyPool([OpenAIPolicy(f"http://127.0.0.1:{_closed_port()}/v1", timeout=5)]).model_name()
    await pool.close()


def test_a_pool_needs_servers() -> None:
    with pytest.raises(InputError, match="at least one"):
        PolicyPool([])


async def test_model_errors_are_not_failed_over() -> None:
    boom = ScriptedPolicy(lambda _m, _i: ValueError("a bug, not an outage"))
    pool = PolicyPool([boom, _named("b")])
    with pytest.raises(ValueError, match="a bug"):
        await pool.generate([{"role": "user", "content": "x"}], PARAMS)


@pytest.mark.parametrize("kind", ["context", "refused"])
async def test_a_request_refused_for_its_content_benches_no_server(kind: str) -> None:
    from dojo.agent.policy import ContextFull, RequestRefused

    error = ContextFull("maximum context length is 1024") if kind == "context" else RequestRefused("one tool call")
    full = ScriptedPolicy(lambda _m, _i: error)
    other = _named("other")
    pool = PolicyPool([full, other], cooldown=60)
    with pytest.raises(type(error)):  # the conversation's own, not the server's failure: no failover
        await pool.generate([{"role": "user", "content": "long"}], PARAMS)
    assert not other.calls and not any(s["benched"] for s in pool.stats()) and pool.failovers == 0
