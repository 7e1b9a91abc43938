"""The labelling page of a review set: ``dojo judge label REVIEW_DIR`` serves it on 127.0.0.1.

One item at a time: the question and the judged text (never the judge's score: a labeller who
sees it anchors on it). One key per label (``p`` pass, ``f`` fail, ``s`` skip by default; a label
set of your own gets its first letters, or digits), ``j``/``→`` next, ``k``/``←`` previous; each
label is appended to ``labels.jsonl`` at once (``dojo.rewards.review``), so nothing is lost when
the page closes. Plain HTML and JavaScript, nothing fetched from elsewhere.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel

from dojo.errors import InputError
from dojo.rewards.review import LABELS, SKIP, Label, append_label, latest, read_items, read_labels

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>dojo judge review</title>
<style>
body { font-family: sans-serif; max-width: 60em; margin: 1.5em auto; color: #222; }
pre { white-space: pre-wrap; background: #f5f5f5; padding: 1em; border-radius: 4px; }
#status { color: #555; } .label { font-weight: bold; } kbd { border: 1px solid #aaa; padding: 0 .3em; }
</style></head><body>
<div id="status"></div>
<h3>Question</h3><pre id="question"></pre>
<h3>Answer</h3><pre id="text"></pre>
<p>Your label: <span class="label" id="mine">none</span></p>
<p id="keys">__KEYS__ &middot; <kbd>j</kbd>/<kbd>&rarr;</kbd> next &middot; <kbd>k</kbd>/<kbd>&larr;</kbd> previous</p>
<script>
const KEYS = __KEYMAP__;
let items = [], mine = {}, at = 0;
function show() {
  if (!items.length) { document.getElementById("status").textContent = "no items"; return; }
  const it = items[at];
  const done = items.filter(i => mine[i.item_id]).length;
  document.getElementById("status").textContent = `item ${at + 1} of ${items.length} (${it.item_id}), ${done} labelled`;
  document.getElementById("question").textContent = it.question;
  document.getElementById("text").textContent = it.text;
  document.getElementById("mine").textContent = mine[it.item_id] || "none";
}
async function label(value) {
  const it = items[at];
  const r = await fetch("labels", {method: "POST", headers: {"Content-Type": "application/json"},
                                   body: JSON.stringify({item_id: it.item_id, label: value})});
  if (!r.ok) { alert("not saved: " + await r.text()); return; }
  if (value === "skip") delete mine[it.item_id]; else mine[it.item_id] = value;
  if (at < items.length - 1) at++;
  show();
}
document.addEventListener("keydown", e => {
  if (e.key === "j" || e.key === "ArrowRight") { at = Math.min(items.length - 1, at + 1); show(); }
  else if (e.key === "k" || e.key === "ArrowLeft") { at = Math.max(0, at - 1); show(); }
  else if (KEYS[e.key]) label(KEYS[e.key]);
});
(async () => {
  items = await (await fetch("items")).json();
  mine = await (await fetch("labels")).json();
  at = Math.max(0, items.findIndex(i => !mine[i.item_id]));
  show();
})();
</script></body></html>
"""


class LabelRequest(BaseModel):
    item_id: str
    label: str


def label_keys(labels: tuple[str, ...]) -> dict[str, str]:
    """One key per label: its first letter when free, else the next digit; ``s`` (or a digit) skips."""
    keys: dict[str, str] = {}
    taken = {"j", "k"}
    for value in (*labels, SKIP):
        key = value[0].lower()
        if key in taken or key in keys:
            key = next(str(d) for d in range(1, 10) if str(d) not in keys)
        keys[key] = value
    return keys


def create_labelling_app(review_dir: Path, labeller: str, labels: tuple[str, ...] = ("pass", "fail")) -> FastAPI:
    """The labelling app of ``review_dir`` for ``labeller``."""
    items = read_items(review_dir)
    if not items:
        raise InputError(f"{review_dir} holds no items; draw some with dojo judge sample")
    if SKIP in labels or len(set(labels)) != len(labels) or not labels:
        raise InputError(f"labels must be distinct and not {SKIP!r}: {labels}")
    keys = label_keys(labels)
    legend = " &middot; ".join(f"<kbd>{html.escape(k)}</kbd> {html.escape(v)}" for k, v in keys.items())
    page = PAGE.replace("__KEYS__", legend).replace("__KEYMAP__", json.dumps(keys))
    known = {item.item_id for item in items}
    app = FastAPI(title="dojo judge review")

    @app.get("/", response_class=HTMLResponse)
    async def index() -> str:
        return page

    @app.get("/items")
    async def list_items() -> list[dict[str, Any]]:
        return [{"item_id": i.item_id, "question": i.question, "text": i.text} for i in items]

    @app.get("/labels")
    async def mine() -> dict[str, str]:
        path = review_dir / LABELS
        done = latest(read_labels(path)) if path.is_file() else {}
        return {item: value for (item, who), value in done.items() if who == labeller}

    @app.post("/labels", response_model=None)
    async def add(req: LabelRequest) -> dict[str, str] | JSONResponse:
        if req.item_id not in known:
            return JSONResponse({"error": f"unknown item {req.item_id!r}"}, status_code=404)
        if req.label not in (*labels, SKIP):
            return JSONResponse({"error": f"label must be one of {[*labels, SKIP]}"}, status_code=400)
        append_label(review_dir, Label(item_id=req.item_id, label=req.label, labeller=labeller))
        return {"saved": req.label}

    return app
