"""Grading 3D scenes: the reference earns 1, doing nothing or the trivial scene earns 0, a forged or
malformed scene scores 0 (never None), and the checks never enter the sandbox."""

from __future__ import annotations

import json
from typing import Any

import pytest

from dojo.rewards import Grader
from dojo.rewards.audit import audit_tasks
from dojo.rewards.scene import SceneError, judge_scene, parse_scene, trivial_scene_candidates
from dojo.sandbox import AsyncSandbox
from dojo.tasks import load_source
from dojo.tasks.model import Task
from dojo.tasks.scene3d import scene_checks
from dojo.tasks.scene_api import SceneAPI
from tests.tasks.recording import Recording


@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return load_source("family:scene3d?n=4&difficulty=0") + load_source("family:scene3d?n=4&difficulty=1")


def calls(*made: tuple[str, dict[str, Any]]) -> str:
    return json.dumps({"turns": [[[{"name": n, "arguments": a} for n, a in made]]]})


async def test_audit_is_clean_and_trivial_scenes_earn_nothing(fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source("family:scene3d?n=16&seed=5")
    report = await audit_tasks(tasks, fast_sandbox)
    assert [t.id for t in report.unverifiable] == [], [t.problems for t in report.unverifiable]
    grader = Grader(fast_sandbox)
    for task in tasks[:6]:
        for name, completion in trivial_scene_candidates(task):
            reward = await grader.grade(task, completion)
            assert reward.value == 0.0, (task.id, name, reward)


async def test_partial_credit_per_check_with_components(fast_sandbox: AsyncSandbox, tasks: list[Task]) -> None:
    task = tasks[-1]  # a room: many checks
    gold = json.loads(task.reference or "")
    without_chair = [c for c in gold["turns"][0][0] if c["arguments"].get("name") != "chair"]
    reward = await Grader(fast_sandbox).grade(task, json.dumps({"turns": [[without_chair]]}))
    assert reward.verdict == "partial" and 0 < reward.value < 1  # type: ignore[operator]
    failed = [k for k, v in reward.components.items() if k.startswith("scene:") and v == 0.0]
    assert failed and all("chair" in k for k in failed)


async def test_a_scene_with_no_object_where_it_belongs_earns_nothing(
    fast_sandbox: AsyncSandbox, tasks: list[Task]
) -> None:
    """Every object made with its size and height but at x = y = 0 rests on the floor (and stands
    upright): without one object where it belongs, those checks earn nothing."""
    grader = Grader(fast_sandbox)
    for task in tasks:
        gold = json.loads(task.reference or "")
        made = [c for turn in gold["turns"] for step in turn for c in step if c["name"].startswith("create_")]
        origin = [{**c, "arguments": {**c["arguments"], "x": 0.0, "y": 0.0}} for c in made]
        reward = await grader.grade(task, json.dumps({"turns": [[origin]]}))
        placed = [v for k, v in reward.components.items() if k.startswith("scene:") and ":object:" in k]
        if not any(placed):
            assert reward.value == 0.0, (task.id, reward.components)
            assert "no object is where it belongs" in " ".join(c.detail for c in reward.cases), reward.cases


async def test_a_text_claim_or_the_checks_printed_earn_nothing(fast_sandbox: AsyncSandbox, tasks: list[Task]) -> None:
    task = tasks[0]
    grader = Grader(fast_sandbox)
    checks = json.dumps(task.tests[0].expected["scene"])
    for text in ("All objects are placed; every check passes.", checks, f"```json\n{checks}\n```"):
        reward = await grader.grade(task, text)
        assert reward.value == 0.0 and reward.verdict in ("no_answer", "fail")


async def test_a_tool_the_api_lacks_is_refused(fast_sandbox: AsyncSandbox, tasks: list[Task]) -> None:
    task = tasks[0]
    forged = {"objects": {"item": {"kind": "box"}}}
    answer = calls(("_load_scenario", {"config": forged}), ("objects", {}), ("set_state", forged),
                   ("__setattr__", {"name": "objects", "value": {}}))  # fmt: skip
    reward = await Grader(fast_sandbox).grade(task, answer)
    assert reward.value == 0.0 and reward.verdict == "fail"
    assert "there is no object named item" in " ".join(c.detail for c in reward.cases)


async def test_a_forged_final_scene_in_the_reply_is_never_read(fast_sandbox: AsyncSandbox, tasks: list[Task]) -> None:
    task = tasks[0]
    gold = json.loads(task.reference or "")["turns"][0][0]
    api = SceneAPI()
    for c in gold:
        getattr(api, c["name"])(**c["arguments"])
    fake = json.dumps(api.list_objects())  # the right final scene, as text: claimed, not built
    for reply in (fake, json.dumps({"turns": [[[]]], "said": [fake]}), f"list_objects() returned {fake}"):
        reward = await Grader(fast_sandbox).grade(task, reply)
        assert reward.value == 0.0, reply[:80]


def scene_text(**change: Any) -> str:
    api = SceneAPI()
    api.create_box("item", 1, 1, 1, x=2, z=0.5)
    scene = api.list_objects()
    scene["objects"][0].update(change)
    return json.dumps(scene)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"bbox": {"min": [0, 0, 0], "max": [9, 9, 9]}}, "bounding box"),
        ({"position": [float("nan"), 0, 0]}, "finite"),
        ({"rotation": [[2, 0, 0], [0, 1, 0], [0, 0, 1]]}, "not a rotation"),
        ({"rotation": [[-1, 0, 0], [0, 1, 0], [0, 0, 1]]}, "reflection"),
        ({"kind": "torus"}, "kind"),
        ({"size": {"width": 1}}, "size"),
        ({"group": "nowhere"}, "does not list it"),
        ({"extra": 1}, "keys"),
    ],
)
def test_a_malformed_scene_scores_zero_with_the_reason(change: dict[str, Any], why: str) -> None:
    with pytest.raises(SceneError, match=why):
        parse_scene(scene_text(**change))
    task = load_source("family:scene3d?n=1&difficulty=0")[0]
    cases, components, problem = judge_scene(scene_checks(task), scene_text(**change))
    assert problem is not None and not any(c.passed for c in cases) and components == {}


async def test_the_checks_and_the_gold_never_enter_the_sandbox(fast_sandbox: AsyncSandbox, tasks: list[Task]) -> None:
    task = tasks[-1]
    recording = Recording(fast_sandbox)
    gold = json.loads(task.reference or "")["turns"][0][0]
    mine = calls(*((c["name"], c["arguments"]) for c in gold[:3]))
    reward = await Grader(recording).grade(task, mine)
    assert reward.value is not None and reward.value < 1
    sent = " ".join(p.source + p.stdin + " ".join(f.content.decode() for f in p.files) for p in recording.programs)
    assert "chair" not in sent and "rotation" not in sent.split("list_objects")[-1]
    for check in scene_checks(task):
        if check.kind == "object" and check.center is not None:
            assert json.dumps(check.center) not in sent
