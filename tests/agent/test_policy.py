"""Policies end to end: the tiny local model, dojo's OpenAI-compatible server, the real openai client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from dojo.agent.hf_policy import HFPolicy
from dojo.agent.policy import (
    Completion,
    ContextFull,
    OpenAIPolicy,
    PolicyError,
    RequestRefused,
    SamplingParams,
    ToolCall,
)
from dojo.agent.policy_server import create_policy_app
from dojo.agent.tiny_model import build_tokenizer, char_vocabulary

HI = [{"role": "user", "content": "hi"}]


def test_char_tokenizer_round_trips_code(tiny_model_dir: Path) -> None:
    from transformers import AutoTokenizer

    code = "def f(x):\n\treturn x * 2  # ok\n    pass\n"
    # Built in memory, and as AutoTokenizer reloads it (it installs Qwen2's byte-level pieces).
    for tok in (build_tokenizer(), AutoTokenizer.from_pretrained(tiny_model_dir)):
        ids = tok(code, add_special_tokens=False).input_ids
        assert len(ids) == len(code)  # one token per character, spaces and newlines included
        assert tok.decode(ids) == code
        assert len(tok) == len(char_vocabulary())


async def test_openai_chat_returns_n_samples_with_token_ids_and_logprobs(policy_server: str) -> None:
    client = openai.AsyncOpenAI(base_url=policy_server, api_key="x")
    resp = await client.chat.completions.create(
        model="tiny", messages=HI, n=3, max_tokens=12, temperature=1.0, logprobs=True,  # type: ignore[arg-type]
        extra_body={"return_token_ids": True},
    )  # fmt: skip
    assert len(resp.choices) == 3
    for choice in resp.choices:
        ids = (choice.model_extra or {})["token_ids"]
        assert choice.logprobs is not None and choice.logprobs.content is not None
        assert len(ids) == len(choice.logprobs.content) <= 12
        assert all(t.logprob <= 0.0 for t in choice.logprobs.content)
    assert resp.usage is not None and resp.usage.prompt_tokens > 0
    assert resp.usage.completion_tokens == sum(len((c.model_extra or {})["token_ids"]) for c in resp.choices)
    await client.close()


async def test_policy_client_reads_what_the_server_returns(policy_server: str) -> None:
    policy = OpenAIPolicy(policy_server)
    assert await policy.model_name() == "tiny"
    out = await policy.generate(HI, SamplingParams(max_tokens=16, seed=3), n=2)
    assert len(out) == 2
    for c in out:
        assert c.token_ids is not None and c.logprobs is not None
        assert len(c.token_ids) == len(c.logprobs) == c.num_tokens
        assert c.finish_reason in ("stop", "length")
    again = await policy.generate(HI, SamplingParams(max_tokens=16, seed=3), n=2)
    assert [c.text for c in again] == [c.text for c in out]  # a seed makes sampling repeatable
    await policy.close()


async def test_completions_api_and_greedy_sampling(policy_server: str) -> None:
    client = openai.AsyncOpenAI(base_url=policy_server, api_key="x")
    a = await client.completions.create(
        model="tiny", prompt="def f(x):", max_tokens=8, temperature=0.0, logprobs=1, n=2
    )
    b = await client.completions.create(model="tiny", prompt="def f(x):", max_tokens=8, temperature=0.0)
    assert a.choices[0].text == a.choices[1].text == b.choices[0].text  # greedy is deterministic
    assert a.choices[0].logprobs is not None and len(a.choices[0].logprobs.token_logprobs or []) >= 1
    assert a.choices[0].finish_reason in ("stop", "length")
    await client.close()


async def test_bad_requests_get_clear_errors(policy_server: str) -> None:
    client = openai.AsyncOpenAI(base_url=policy_server, api_key="x", max_retries=0)
    with pytest.raises(openai.NotFoundError, match="serves 'tiny'"):
        await client.chat.completions.create(model="gpt-9", messages=HI)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="streaming is not supported"):
        await client.chat.completions.create(model="tiny", messages=HI, stream=True)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="n"):
        await client.chat.completions.create(model="tiny", messages=HI, n=0)  # type: ignore[arg-type]
    with pytest.raises(openai.BadRequestError, match="messages"):
        await client.chat.completions.create(model="tiny", messages=[])
    await client.close()


async def test_a_prompt_past_the_context_is_context_full_not_a_server_failure(
    policy_server: str, tiny_model_dir: Path
) -> None:
    """The tiny model (1,024 positions) refuses a longer prompt as vLLM does, with a 400 naming the
    context length; the client raises ContextFull for it (the episode's own length: a 400 had raised
    out of the episode and stopped the whole rollout) and PolicyError for any other 400."""
    long = [{"role": "user", "content": "x" * 1500}]
    with pytest.raises(ContextFull, match="maximum context length is 1024 tokens"):
        await HFPolicy.from_dir(tiny_model_dir).generate(long, SamplingParams(max_tokens=4))
    policy = OpenAIPolicy(policy_server)
    with pytest.raises(ContextFull, match="maximum context length is 1024 tokens"):
        await policy.generate(long, SamplingParams(max_tokens=4))
    with pytest.raises(PolicyError, match=r"refused the request \(400\)"):
        await policy.generate(HI, SamplingParams(max_tokens=4), n=0)
    await policy.close()
    client = openai.AsyncOpenAI(base_url=policy_server, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        await client.completions.create(model="tiny", prompt="x" * 1500, max_tokens=4)
    await client.close()


@pytest.mark.parametrize(
    ("status", "message", "raised"),
    [
        (400, "The decoder prompt (length 5000) is longer than the maximum model length of 4096.", ContextFull),
        (422, "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096.", ContextFull),
        (413, "Request Entity Too Large", ContextFull),
        (400, "This model only supports single tool-calls at once!", RequestRefused),
        (422, "Input validation error: temperature must be strictly positive", RequestRefused),
        (404, "The model `tiny` does not exist.", PolicyError),
        (401, "Invalid API key", PolicyError),
    ],
)
async def test_every_refusal_of_the_server_is_a_dojo_error(status: int, message: str, raised: type) -> None:
    """A 413 or 422, or any status but 400, 429 and 5xx, raised the openai client's own error out of
    the episode (which stopped the rollout); the wordings vLLM's engine and TGI give a context
    overflow were read as the server's failure (no reward, retried)."""
    import httpx

    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "tiny")
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    error = openai.APIStatusError(message, response=httpx.Response(status, request=request), body=None)

    async def refuse(**_kwargs: Any) -> Any:
        raise error

    policy._client.chat.completions.create = refuse  # type: ignore[method-assign]
    with pytest.raises(raised) as caught:
        await policy.generate(HI, SamplingParams(max_tokens=4))
    assert type(caught.value) is raised and str(status) in str(caught.value)
    await policy.close()


async def test_a_reply_longer_than_the_context_has_room_for_is_asked_shorter() -> None:
    """vLLM refuses a prompt that fits with max_tokens past the context, and says both sizes: asked
    again for what fits, rather than the episode ended (or the task left out as too long)."""
    import httpx

    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "tiny")
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions")
    too_large = openai.APIStatusError(
        "'max_tokens' or 'max_completion_tokens' is too large: 8000. This model's maximum context length is 4096 "
        "tokens and your request has 2778 input tokens (8000 > 4096 - 2778).",
        response=httpx.Response(400, request=request),
        body=None,
    )
    too_long = openai.APIStatusError(
        "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens.",
        response=httpx.Response(400, request=request),
        body=None,
    )
    down = openai.InternalServerError("down", response=httpx.Response(503, request=request), body=None)
    asked: list[int] = []

    async def create(**kwargs: Any) -> Any:
        asked.append(kwargs["max_tokens"])
        raise too_large if len(asked) == 1 else down

    policy._client.chat.completions.create = create  # type: ignore[method-assign]
    with pytest.raises(PolicyError, match="failed"):  # (the second request reached the server)
        await policy.generate(HI, SamplingParams(max_tokens=8000))
    assert asked == [8000, 4096 - 2778]

    async def refuse(**kwargs: Any) -> Any:
        asked.append(kwargs["max_tokens"])
        raise too_long

    asked.clear()
    policy._client.chat.completions.create = refuse  # type: ignore[method-assign]
    with pytest.raises(ContextFull):
        await policy.generate(HI, SamplingParams(max_tokens=500))
    assert asked == [500]  # the prompt alone does not fit: no second request
    await policy.close()


async def test_server_down_is_a_policy_error_not_a_reward() -> None:
    policy = OpenAIPolicy("http://127.0.0.1:9/v1", "tiny", timeout=2.0)
    with pytest.raises(PolicyError, match="failed"):
        await policy.generate(HI, SamplingParams(max_tokens=4))
    await policy.close()


async def test_hf_policy_locally(tiny_model_dir: Path) -> None:
    policy = HFPolicy.from_dir(tiny_model_dir)
    out = await policy.generate(HI, SamplingParams(max_tokens=20, temperature=1.0), n=3)
    assert len(out) == 3
    for c in out:
        assert c.token_ids is not None and c.logprobs is not None and len(c.token_ids) == len(c.logprobs) <= 20
        # the text is the decoded tokens (special tokens dropped)
        assert c.text == policy.tokenizer.decode(c.token_ids, skip_special_tokens=True)
    with pytest.raises(ValueError, match="not a model directory"):
        HFPolicy.from_dir(tiny_model_dir / "missing")


async def test_a_prompt_sampled_many_times_is_computed_once_with_the_same_tokens(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A GRPO group's copies of one prompt share one prefill (its KV cache copied to each row); what
    they sample is what a batch that computes every row gives."""
    import asyncio

    policy = HFPolicy.from_dir(tiny_model_dir)
    other = [{"role": "user", "content": "say something longer"}]
    shared: list[int] = []
    prefill = HFPolicy._shared_prefill

    def counting(self: HFPolicy, input_ids: Any, attention: Any) -> dict[str, Any]:
        out = prefill(self, input_ids, attention)
        shared.append(len(out))
        return out

    async def batch() -> list[list[Completion]]:
        sampled = SamplingParams(max_tokens=16, temperature=1.0, seed=7)
        greedy = SamplingParams(max_tokens=16, temperature=0.0)
        return [
            *await asyncio.gather(*(policy.generate(m, sampled) for m in (HI, HI, other, HI))),
            *await asyncio.gather(*(policy.generate(m, greedy) for m in (HI, other, HI))),
        ]

    monkeypatch.setattr(HFPolicy, "_shared_prefill", counting)
    once = await batch()
    assert shared == [1, 1]  # both batches repeat a prompt: one cache each
    monkeypatch.setattr(HFPolicy, "_shared_prefill", lambda self, *a: {})
    every_row = await batch()
    assert [[c.token_ids for c in cs] for cs in once] == [[c.token_ids for c in cs] for cs in every_row]
    for a, b in zip(once, every_row, strict=True):
        assert a[0].logprobs == pytest.approx(b[0].logprobs, abs=1e-4)


async def test_stop_sequences_cut_the_text(tiny_model_dir: Path) -> None:
    policy = HFPolicy.from_dir(tiny_model_dir)
    out = await policy.generate(HI, SamplingParams(max_tokens=60, temperature=1.0, seed=0), n=4)
    stop = next((c.text[3] for c in out if len(c.text) > 3), None)
    if stop is None:
        pytest.skip("the random model ended every sample early")
    cut = await policy.generate(HI, SamplingParams(max_tokens=60, temperature=1.0, seed=0, stop=[stop]), n=4)
    assert all(stop not in c.text for c in cut)


CALL = '<tool_call>\n{"name": "run_code", "arguments": {"code": "print(1)"}}\n</tool_call>'
MALFORMED = '<tool_call>\n{"name": "run_code", "arguments": {"code": \n</tool_call>'


class _FixedReplyPolicy(HFPolicy):
    """The server's tool-call parsing, with a model that always writes ``text``."""

    text = ""

    async def complete_ids(self, prompt_ids: list[int], params: SamplingParams, *, n: int = 1) -> list[Completion]:
        return [Completion(text=self.text, finish_reason="stop", token_ids=[1, 2], logprobs=[-0.1, -0.2])] * n


async def _served_reply(tiny_model_dir: Path, text: str, **body: Any) -> tuple[Any, httpx.Response]:
    """What the real openai client reads of a reply ``text`` with a tool offered, and the server's
    answer to a raw request of ``body`` (with ``HI``)."""
    base = HFPolicy.from_dir(tiny_model_dir)
    policy = _FixedReplyPolicy(base.model, base.tokenizer)
    policy.text = text
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "run_code", "parameters": {}}}]
    transport = httpx.ASGITransport(app=create_policy_app(policy, "tiny"))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        client = openai.AsyncOpenAI(base_url="http://test/v1", api_key="x", http_client=http)
        resp = await client.chat.completions.create(model="tiny", messages=HI, tools=tools)  # type: ignore[arg-type]
        raw = await http.post("/v1/chat/completions", json={"messages": HI, **body})
    return resp.choices[0], raw


async def test_server_returns_openai_tool_calls(tiny_model_dir: Path) -> None:
    choice, _ = await _served_reply(tiny_model_dir, f"Let me run it.\n{CALL}")
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.function.name == "run_code" and call.function.arguments == '{"code": "print(1)"}'
    # the call travels once, as tool_calls: a content that kept its text made a chat template render it twice
    assert choice.message.content == "Let me run it."


async def test_a_reply_with_a_malformed_call_is_served_as_text_and_the_client_reads_every_call(
    tiny_model_dir: Path,
) -> None:
    """As vLLM's parsers return it: the whole reply as content, no ``tool_calls``; the client reads the
    calls from the text, the malformed one included (the agent reports its error and counts it). The
    server had returned the call that parsed and left the malformed block out of the content too: the
    model was told nothing of it and paid nothing for it."""
    from dojo.agent.tool_calls import parse_tool_calls

    text = f"{CALL}\n{MALFORMED}"
    # (and an OpenAI client that sends null for "no logprobs" is answered, not refused)
    choice, plain = await _served_reply(tiny_model_dir, text, logprobs=None, max_tokens=4)
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert choice.message.content == text
    assert [c.name for c in parse_tool_calls(choice.message.content)] == ["run_code", "invalid"]
    assert plain.status_code == 200, plain.text


async def test_a_long_reply_gets_the_time_its_tokens_take_before_the_client_gives_up() -> None:
    """The client's timeout is at least ``timeout`` and a reply's ``max_tokens`` at the slowest working
    pace: a fixed 300 s had made a reply long on purpose, on a batched server, a policy failure (no
    reward) where a terse wrong one scored 0. A server slower than that pace is still a failure."""
    from tests.agent.scripted import ScriptedPolicy, served

    with served(ScriptedPolicy(lambda _m, _i: "a long reply", delay=0.6)) as url:
        policy = OpenAIPolicy(url, timeout=0.2)
        try:
            (reply,) = await policy.generate(HI, SamplingParams(max_tokens=64))  # (6.4 s allowed)
            assert reply.text == "a long reply"
            with pytest.raises(PolicyError, match="timed out"):
                await policy.generate(HI, SamplingParams(max_tokens=1))  # (0.2 s: the client's own)
        finally:
            await policy.close()


# A template that takes one tool call per message (Llama-3.1's words)
_ONE_CALL_TEMPLATE = (
    "{%- for m in messages %}{%- if m.role == 'assistant' and m.tool_calls %}"
    "{%- if m.tool_calls|length != 1 %}{{ raise_exception('This model only supports single tool-calls at once!') }}"
    "{%- endif %}<call>{{ m.tool_calls[0].function.name }}</call>"
    "{%- else %}<{{ m.role }}>{{ m.content }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<assistant>{%- endif %}"
)


async def test_a_conversation_the_chat_template_refuses_is_a_refused_request(tiny_model_dir: Path) -> None:
    """A reply of two calls that the template cannot render is refused as vLLM refuses it (a 400, read
    as ``RequestRefused``: the episode grades its last candidate), in process and served. jinja2's
    error had escaped ``HFPolicy.generate`` (stopping the rollout) and the server answered it 500 (a
    policy failure: no reward for the policy's own reply)."""
    policy = HFPolicy.from_dir(tiny_model_dir)
    policy.tokenizer.chat_template = _ONE_CALL_TEMPLATE
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "run_code", "arguments": "{}"}} for i in range(2)]
    messages = [
        *HI,
        {"role": "assistant", "content": "", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": "1"} for i in range(2)),
    ]
    params = SamplingParams(max_tokens=4, temperature=0.0)
    assert (await policy.generate(HI, params))[0].finish_reason is not None  # (the template renders the rest)
    with pytest.raises(RequestRefused, match="single tool-calls"):
        await policy.generate(messages, params)
    broken = HFPolicy.from_dir(tiny_model_dir)  # a template that does not render at all is the set-up's failure
    broken.tokenizer.chat_template = "{{ messages | no_such_filter }}"
    with pytest.raises(PolicyError, match="chat template failed") as failed:
        await broken.generate(messages, params)
    assert not isinstance(failed.value, RequestRefused)
    transport = httpx.ASGITransport(app=create_policy_app(policy, "tiny"))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
        served = OpenAIPolicy("http://test/v1", "tiny")
        served._client = openai.AsyncOpenAI(base_url="http://test/v1", api_key="x", http_client=http)
        with pytest.raises(RequestRefused, match="single tool-calls"):
            await served.generate(messages, params)


def test_a_native_tool_call_is_rendered_once_in_the_next_prompt(tiny_model_dir: Path) -> None:
    """The episode's record of a reply whose calls came back as ``tool_calls`` keeps them out of its
    content: the chat template renders them from ``tool_calls``, and the model had been shown each
    call twice (with one tool response)."""
    from dojo.agent.episode import _assistant_message

    policy = HFPolicy.from_dir(tiny_model_dir)
    text = 'Let me run it.\n<tool_call>\n{"name": "run_code", "arguments": {"code": "print(1)"}}\n</tool_call>'
    reply = Completion(text=text, tool_calls=[ToolCall(id="c0", name="run_code", arguments={"code": "print(1)"})])
    messages = [*HI, _assistant_message(reply), {"role": "tool", "tool_call_id": "c0", "content": "1"}]
    tools: list[dict[str, Any]] = [{"type": "function", "function": {"name": "run_code", "parameters": {}}}]
    rendered = policy.render(messages, tools)
    assert rendered.count('"run_code"') - policy.render(HI, tools).count('"run_code"') == 1, rendered
    assert "Let me run it." in rendered
