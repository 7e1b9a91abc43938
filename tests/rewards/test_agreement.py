"""Agreement between a judge and people: the statistics on worked examples, a review set's labels
compared, and the alert while a run goes on."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from dojo.errors import InputError
from dojo.rewards.agreement import AgreementMonitor, agreement, calibration, cohen_kappa, krippendorff_alpha
from dojo.rewards.review import Label, ReviewItem, append_label, draw, read_labels, write_items


def test_cohen_kappa_on_a_worked_example() -> None:
    # 50 items: both yes 20, A yes B no 5, A no B yes 10, both no 15: p_o = 0.7, p_e = 0.5
    a = ["yes"] * 25 + ["no"] * 25
    b = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == 1.0 and math.isnan(cohen_kappa([], []))


def test_krippendorff_alpha_on_krippendorffs_own_example() -> None:
    """Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers, 12 units,
    missing values; nominal alpha 0.743."""
    n = None
    a = [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n]
    b = [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3]
    c = [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n]
    d = [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n]
    assert krippendorff_alpha(list(zip(a, b, c, d, strict=True))) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha([["x", "x"], ["y", "y"]]) == 1.0


def items(scores: list[float]) -> list[ReviewItem]:
    return [
        ReviewItem(item_id=f"i{k}", text="t", judge_score=s, judge_label="pass" if s >= 0.5 else "fail")
        for k, s in enumerate(scores)
    ]


def test_the_judge_against_the_majority_of_several_labellers() -> None:
    review = items([0.9, 0.8, 0.1, 0.2])
    labels = [
        Label(item_id=f"i{k}", label=v, labeller=who)
        for who, votes in {
            "ann": "pass fail fail fail",
            "bob": "pass fail fail pass",
            "cy": "pass pass fail fail",
        }.items()
        for k, v in enumerate(votes.split())
    ]
    labels.append(Label(item_id="i0", label="skip", labeller="cy"))  # a skip withdraws cy's label of i0
    found = agreement(review, labels)
    assert found.items == 4 and found.labellers == 3
    assert found.accuracy == 0.75  # i1: the judge passes it, the majority fails it
    assert found.confusion == {"pass": {"pass": 1, "fail": 1}, "fail": {"fail": 2}}
    assert 0 < found.alpha_labellers < 1 and not math.isnan(found.alpha_with_judge)
    assert calibration(found.pairs, bins=2) == [(0.25, 0.0, 2), (0.75, 0.5, 2)]


def test_labels_for_unknown_items_or_none_at_all_are_clear_errors() -> None:
    with pytest.raises(InputError, match="not in the review set"):
        agreement(items([0.5]), [Label(item_id="nope", label="pass")])
    with pytest.raises(InputError, match="no labelled item"):
        agreement(items([0.5]), [])


def test_bad_label_lines_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"item_id": "i0", "label": "pass"}\n{"item_id": "i1"}\n')
    with pytest.raises(InputError, match=r"labels.jsonl:2: label"):
        read_labels(path)
    path.write_text("not json\n")
    with pytest.raises(InputError, match=r":1: not JSON"):
        read_labels(path)


def test_draw_takes_judged_rows_at_the_rate() -> None:
    rows = [{"episode_id": f"e{k}", "final": "x", "components": '{"tests.judge": 0.7}'} for k in range(2000)]
    rows.append({"episode_id": "unjudged", "final": "x", "components": '{"correctness": 1.0}'})
    drawn = draw(rows, 0.1, seed=1)
    assert 150 < len(drawn) < 250 and all(i.component == "tests.judge" and i.judge_label == "pass" for i in drawn)
    assert [i.item_id for i in draw(rows, 0.1, seed=1)] == [i.item_id for i in drawn]
    with pytest.raises(InputError, match="rate"):
        draw(rows, 0.0)


def test_a_drop_in_agreement_during_a_run_raises_an_alert(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_items(tmp_path, items([0.9] * 30))
    monitor = AgreementMonitor(tmp_path, threshold=0.8, min_items=20)
    assert monitor.check()["judge/agreement_items"] == 0.0  # nothing labelled yet
    for k in range(25):
        append_label(tmp_path, Label(item_id=f"i{k}", label="pass" if k < 22 else "fail"))
    metrics = monitor.check()
    assert metrics["judge/agreement"] == pytest.approx(22 / 25) and metrics["judge/agreement_alert"] == 0.0
    for k in range(10):  # people now disagree with the judge's passes
        append_label(tmp_path, Label(item_id=f"i{k}", label="fail"))
    with caplog.at_level(logging.WARNING, logger="dojo.rewards.agreement"):
        metrics = monitor.check()
    assert metrics["judge/agreement_alert"] == 1.0 and monitor.alerts == 1
    assert "below 0.800 on 25 labelled items" in caplog.text


def test_review_items_whose_text_holds_line_separators_read_back(tmp_path: Path) -> None:
    """JSON writes U+2028, U+2029 and U+0085 as they are; a reader that split lines on them (as
    ``str.splitlines`` does) refused the whole review set."""
    from dojo.rewards.review import read_items

    item = ReviewItem(item_id="a", text="one\u2028two\u2029three\x85four", judge_score=0.5, judge_label="pass")
    write_items(tmp_path, [item])
    assert read_items(tmp_path) == [item]
