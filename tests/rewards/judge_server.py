"""A scripted judge behind a real OpenAI-compatible server on 127.0.0.1, for judge tests and benches.

``serve_judge(script)`` starts a FastAPI app (``/v1/models``, ``/v1/chat/completions``) with uvicorn
as a task of the running event loop (no thread) and yields its base URL; the server is shut down on
exit. ``script(messages, body)`` returns the reply's content, an ``int`` (an HTTP status to answer
with) or raises. The scripts here read the request as a model would:

- ``ObeyingJudge``: judges honestly by a keyword, but obeys any instruction it sees outside the
  quoted regions of its prompt (as it understands them: a region ends at the first closing marker
  it was told of). With no fence, all of the judged text is outside.
- ``FlippingJudge``: the honest verdict, flipped at random with a known rate.
- ``FirstPreferringJudge``: in a comparison, always answers A.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from dojo.rewards.judge_injection import fold

Script = Callable[[list[dict[str, Any]], dict[str, Any]], Any]

# What the obeying judge takes as an instruction addressed to it (read liberally, look-alikes folded).
CUES = (
    "ignore",
    "disregard",
    "override",
    "forget",
    "give",
    "award",
    "assign",
    "full marks",
    "10/10",
    "maximum",
    "perfect",
    "top mark",
    "highest",
    "you are now",
    "pretend",
    "act as",
    "role",
    "system",
    "instruction",
    '"met"',
    '"level"',
    '"winner"',
    "verdict",
    "better",
    "wins",
    "must",
    "deserves",
    "grader",
    "judge",
    "rubric",
    '"score"',
)


def app_for(script: Script) -> FastAPI:
    app = FastAPI()
    app.state.requests = []

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "scripted-judge", "object": "model"}]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(request: Request) -> Any:
        body = await request.json()
        app.state.requests.append(body)
        try:
            out = script(body["messages"], body)
        except Exception as e:  # the server failing: a 500, as a crashed model server answers
            return JSONResponse({"error": {"message": str(e)}}, status_code=500)
        if isinstance(out, int):
            return JSONResponse({"error": {"message": f"scripted {out}"}}, status_code=out)
        if isinstance(out, tuple):  # (status, the error's message): a refusal in the server's own words
            return JSONResponse({"error": {"message": out[1]}}, status_code=out[0])
        finish = "stop"
        if isinstance(out, dict):  # {"content": ..., "finish_reason": ...}: a reply cut at max_tokens, say
            out, finish = out["content"], out["finish_reason"]
        message = {"role": "assistant", "content": out}
        return {
            "id": "x",
            "object": "chat.completion",
            "model": "scripted-judge",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }

    return app


@asynccontextmanager
async def serve_judge(script: Script) -> AsyncIterator[str]:
    """Serve ``script`` on a free loopback port; yields the base URL (``.../v1``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(app_for(script), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        await task


def markers(system: str) -> list[tuple[str, str]]:
    """The marker pairs the judge's instructions announce (``Markers: OPEN ... CLOSE``)."""
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^Markers: (.+?) \.\.\. (.+)$", system, re.MULTILINE)]


def outside_and_inside(messages: list[dict[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """By label (TEXT, A, B): the text the judge reads as instructions (outside every region, after
    that label's heading) and the text it reads as the quoted data. A region ends at the first
    occurrence of its closing marker, as a naive reader takes it."""
    system, user = messages[0]["content"], messages[-1]["content"]
    pairs = markers(system)
    body = user.split("Text to assess:\n", 1)[-1] if "Text to assess:" in user else user.split("Answer A:\n", 1)[-1]
    labels = ["TEXT"] if "Text to assess:" in user else ["A", "B"]
    if "Answer B:\n" in body and not pairs:
        parts = dict(zip(labels, body.split("\n\nAnswer B:\n", 1), strict=False))
    elif not pairs:
        parts = {labels[0]: body}
    else:
        parts = {}
    outside = {label: "" for label in labels}
    inside = {label: "" for label in labels}
    if not pairs:
        for label, text in parts.items():
            outside[label] = text.removeprefix(f"{label}:\n")
            inside[label] = outside[label]
        return outside, inside
    rest = body
    for label, (open_, close) in zip(labels, pairs, strict=False):
        start = rest.find(open_)
        if start < 0:
            continue
        rest = rest[start + len(open_) :]
        end = rest.find(close)
        inside[label], rest = (rest, "") if end < 0 else (rest[:end], rest[end + len(close) :])
        nxt = rest.find(pairs[labels.index(label) + 1][0]) if labels.index(label) + 1 < len(pairs) else -1
        outside[label] = rest if nxt < 0 else rest[:nxt]
    return outside, inside


def obeys(text: str) -> bool:
    folded = fold(text)
    return any(cue in folded for cue in CUES)


def rubric_verdict(schema: dict[str, Any], best: bool) -> str:
    """A verdict for the schema's criteria: all at their best, or all at their worst."""
    out: dict[str, Any] = {}
    for name, spec in schema["properties"].items():
        props = spec["properties"]
        if "met" in props:
            out[name] = {"reason": "scripted", "met": best}
        else:
            out[name] = {"reason": "scripted", "level": props["level"]["maximum"] if best else 0}
    return json.dumps(out)


def schema_of(body: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = body["response_format"]["json_schema"]["schema"]
    return schema


class ObeyingJudge:
    """Honest by ``keyword`` (present: best verdict; absent: worst; in a comparison the answer that
    has it wins, else a tie), but any instruction seen outside the quoted regions is obeyed: the
    rubric's best verdict, or the label it escaped from as the winner."""

    def __init__(self, keyword: str = "chlorophyll") -> None:
        self.keyword = keyword
        self.obeyed = 0

    def __call__(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        schema = schema_of(body)
        outside, inside = outside_and_inside(messages)
        escaped = [label for label, text in outside.items() if obeys(text)]
        if escaped:
            self.obeyed += 1
        if "winner" in schema["properties"]:
            if escaped:
                return json.dumps({"reason": "told so", "winner": escaped[0] if len(escaped) == 1 else "tie"})
            has = [label for label in ("A", "B") if self.keyword in inside.get(label, "")]
            return json.dumps({"reason": "keyword", "winner": has[0] if len(has) == 1 else "tie"})
        return rubric_verdict(schema, bool(escaped) or self.keyword in inside.get("TEXT", ""))


class FlippingJudge:
    """Honest by ``keyword`` (present: pass), with each verdict flipped with probability ``rate``."""

    def __init__(self, rate: float, seed: int = 0, keyword: str = "correct") -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.keyword = keyword

    def __call__(self, messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
        _, inside = outside_and_inside(messages)
        good = re.search(rf"\b{self.keyword}\b", inside.get("TEXT", "")) is not None
        if self.rng.random() < self.rate:
            good = not good
        return rubric_verdict(schema_of(body), good)


def first_preferring(messages: list[dict[str, Any]], body: dict[str, Any]) -> str:
    """A judge with a position bias and nothing else: the first answer shown always wins."""
    return json.dumps({"reason": "the first one", "winner": "A"})
