"""The labelling page: the page itself, items without the judge's score, labels appended as JSONL."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from dojo.errors import InputError
from dojo.rewards.review import ReviewItem, read_labels, write_items
from dojo.service.labelling import create_labelling_app, label_keys


def review(tmp_path: Path) -> Path:
    write_items(
        tmp_path,
        [
            ReviewItem(item_id=f"e{k}", question="Q?", text=f"answer {k}", judge_score=0.9, judge_label="pass")
            for k in range(3)
        ],
    )
    return tmp_path


async def test_labels_are_saved_as_jsonl_and_read_back(tmp_path: Path) -> None:
    app = create_labelling_app(review(tmp_path), "ann")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        page = (await client.get("/")).text
        assert "<kbd>p</kbd> pass" in page and "<kbd>f</kbd> fail" in page and "<kbd>s</kbd> skip" in page
        assert "http" not in page.split("<script>")[1]  # nothing fetched from elsewhere
        shown = (await client.get("/items")).json()
        assert shown[0] == {"item_id": "e0", "question": "Q?", "text": "answer 0"}  # no judge score
        assert (await client.post("/labels", json={"item_id": "e0", "label": "fail"})).status_code == 200
        assert (await client.post("/labels", json={"item_id": "e1", "label": "pass"})).status_code == 200
        assert (await client.get("/labels")).json() == {"e0": "fail", "e1": "pass"}
        assert (await client.post("/labels", json={"item_id": "zz", "label": "pass"})).status_code == 404
        assert (await client.post("/labels", json={"item_id": "e0", "label": "meh"})).status_code == 400
    assert [(lab.item_id, lab.label, lab.labeller) for lab in read_labels(tmp_path / "labels.jsonl")] == [
        ("e0", "fail", "ann"),
        ("e1", "pass", "ann"),
    ]


def test_keys_for_a_label_set_of_ones_own(tmp_path: Path) -> None:
    assert label_keys(("good", "bad", "great")) == {"g": "good", "b": "bad", "1": "great", "s": "skip"}
    with pytest.raises(InputError, match="no items"):
        create_labelling_app(tmp_path, "ann") if (tmp_path / "items.jsonl").write_text("") == 0 else None
