"""A 3D scene task graded (``family:scene3d``: a ``tools`` task whose API is the scene graph,
``ApiScenario.check == "geometry"``): the candidate's calls run on the scene API in the sandbox,
the final scene comes back as data, and it is validated and measured here.

The run: the candidate's calls, turn by turn, on ``dojo.tasks.scene_api.SceneAPI`` (the simulated-API
driver; only the offered tools, by name, with JSON arguments), and after them one ``list_objects``
call of the grader's own, whose result (the final scene) is the only thing read back. The task's
checks and the gold calls never enter the run.

The scene is validated strictly (``parse_scene``): the shape of every entry, finite sizes within
bounds, orthonormal rotations, consistent groups, and every reported bounding box equal to the one
computed here from kind, size, position and rotation. A scene that fails scores 0 with the reason
(never ``None``: only a sandbox failure is). Then each check of the task (``dojo.tasks.scene3d``)
is one test and one reward component (``scene:<i>:<kind>:<name>``):

- ``object``: the object exists with that shape, its bounding box has that size and centre;
- ``on_floor``: its bottom is at z = 0;
- ``on_top_of``: its bottom is at the base's top, its centre over the base (``centred``: over the base's centre);
- ``next_to``: it is ``gap`` from the other's ``side`` (``+x``: beyond its max x) and level with its centre across;
- ``under_corner``: its top is at the other's bottom, flush with the other's ``corner`` (``-x+y``, ...);
- ``inside``: its box lies within the other's and rests on its bottom;
- ``aligned``: its centre is ``spacing`` from the other's along ``axis``, level with it and in line across;
- ``group``: it is a group of exactly these members;
- ``rotation``: it stands upright, turned ``yaw`` degrees about z (modulo ``period``: a box's symmetry).

Lengths are compared within the check's ``tol`` (metres), angles within ``tol_deg``. A scene in
which no object is where it belongs (no ``object`` check holds) earns nothing for the rest: every
object made at the origin and set on the floor passed the ``on_floor`` and upright ``rotation``
checks, half the reward of a room in which nothing was placed.
"""

from __future__ import annotations

import json
import math
from typing import Any

from dojo.rewards.documents import DocumentGrade
from dojo.rewards.harness import InvalidTask
from dojo.rewards.outcome import CaseOutcome
from dojo.rewards.simulated_api import candidate_turns, run_api_calls
from dojo.sandbox import Limits, SandboxAPI
from dojo.tasks.gold_calls import gold_turns
from dojo.tasks.model import Task
from dojo.tasks.scene3d import SceneCheck, scene_checks
from dojo.tasks.scene_api import KINDS, MAX_METRES, MAX_OBJECTS, NAME, SIZE_KEYS, Vector, world_boxes
from dojo.tasks.values import untrusted_json

MAX_CALLS = 400  # calls in one answer: a scene of at most MAX_OBJECTS objects never needs more
ENTRY_KEYS = {"name", "kind", "size", "position", "rotation", "group", "members", "bbox"}
Box = tuple[Vector, Vector]


class SceneError(ValueError):
    """The final scene is malformed (or forged): it scores 0."""


SceneGrade = DocumentGrade  # (the fields of ``graders.TestResults`` a scene sets: the same as a document's)


def _finite(value: Any, what: str, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SceneError(f"{what} is not a finite number: {str(value)[:40]}")
    if abs(value) > MAX_METRES or (positive and value <= 0):
        raise SceneError(f"{what} is out of bounds: {value}")
    return float(value)


def _vector(value: Any, what: str) -> Vector:
    if not isinstance(value, list) or len(value) != 3:
        raise SceneError(f"{what} is not three numbers")
    return [_finite(v, what) for v in value]


def _rotation(value: Any, what: str) -> list[Vector]:
    if not isinstance(value, list) or len(value) != 3:
        raise SceneError(f"{what} is not a 3 x 3 matrix")
    rows = [_vector(r, what) for r in value]
    for i in range(3):
        for j in range(3):
            dot = sum(rows[i][k] * rows[j][k] for k in range(3))
            if abs(dot - (i == j)) > 1e-6:
                raise SceneError(f"{what} is not a rotation (its rows are not orthonormal)")
    det = (rows[0][0] * (rows[1][1] * rows[2][2] - rows[1][2] * rows[2][1])
           - rows[0][1] * (rows[1][0] * rows[2][2] - rows[1][2] * rows[2][0])
           + rows[0][2] * (rows[1][0] * rows[2][1] - rows[1][1] * rows[2][0]))  # fmt: skip
    if abs(det - 1) > 1e-6:
        raise SceneError(f"{what} is a reflection, not a rotation")
    return rows


def parse_scene(text: str) -> dict[str, dict[str, Any]]:
    """The final scene (``list_objects``' result as JSON text) as objects by name; ``SceneError``
    saying what is wrong with it (see the module doc)."""
    try:
        data = untrusted_json(text)
    except ValueError as e:
        raise SceneError(f"the scene is not JSON: {str(e)[:100]}") from None
    if not isinstance(data, dict) or set(data) != {"unit", "objects"} or data["unit"] != "m":
        raise SceneError("the scene is not {'unit': 'm', 'objects': [...]}")
    entries = data["objects"]
    if not isinstance(entries, list) or len(entries) > MAX_OBJECTS:
        raise SceneError(f"the scene's objects are not a list of at most {MAX_OBJECTS}")
    objects: dict[str, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or set(entry) != ENTRY_KEYS:
            raise SceneError(f"an object's entry does not have exactly the keys {sorted(ENTRY_KEYS)}")
        name, kind = entry["name"], entry["kind"]
        if not isinstance(name, str) or not NAME.match(name) or name in objects:
            raise SceneError(f"object name {str(name)[:70]!r} is not a valid, unique name")
        if kind not in KINDS:
            raise SceneError(f"{name}: kind {str(kind)[:20]!r} is not one of {', '.join(KINDS)}")
        size = entry["size"]
        if not isinstance(size, dict) or set(size) != set(SIZE_KEYS[kind]):
            raise SceneError(f"{name}: a {kind}'s size has exactly {list(SIZE_KEYS[kind])}")
        members = entry["members"]
        if (
            not isinstance(members, list)
            or not all(isinstance(m, str) for m in members)
            or (kind != "group" and members)
        ):
            raise SceneError(f"{name}: members must be a list of names (none for a {kind})")
        group = entry["group"]
        if group is not None and not isinstance(group, str):
            raise SceneError(f"{name}: its group is not a name")
        objects[name] = {
            "kind": kind,
            "size": {k: _finite(v, f"{name}'s {k}", positive=True) for k, v in size.items()},
            "position": _vector(entry["position"], f"{name}'s position"),
            "rotation": _rotation(entry["rotation"], f"{name}'s rotation"),
            "group": group,
            "members": list(members),
            "bbox": entry["bbox"],
        }
    for name, obj in objects.items():
        if obj["group"] is not None and name not in objects.get(obj["group"], {}).get("members", ()):
            raise SceneError(f"{name} is in group {obj['group']}, which does not list it")
        for m in obj["members"]:
            if m not in objects or objects[m]["group"] != name:
                raise SceneError(f"group {name} lists {m}, which is not its member")
    boxes = world_boxes(objects)
    for name, obj in objects.items():
        reported, computed = obj.pop("bbox"), boxes.get(name)
        if computed is None and reported is None:
            continue
        if not isinstance(reported, dict) or set(reported) != {"min", "max"} or computed is None:
            raise SceneError(f"{name}: its bounding box is not what its geometry gives")
        got = (_vector(reported["min"], f"{name}'s box"), _vector(reported["max"], f"{name}'s box"))
        if any(abs(got[s][i] - computed[s][i]) > 1e-6 for s in range(2) for i in range(3)):
            raise SceneError(f"{name}: its bounding box is not what its geometry gives")
    return objects


def _centre(box: Box) -> Vector:
    return [(box[0][i] + box[1][i]) / 2 for i in range(3)]


def _fmt(values: Vector) -> str:
    return "(" + ", ".join(f"{v:.3f}" for v in values) + ")"


def check_scene(check: SceneCheck, objects: dict[str, dict[str, Any]], boxes: dict[str, Box]) -> tuple[bool, str]:
    """(passed, why not) of one check on a validated scene."""
    c = check
    if c.name not in objects:
        return False, f"there is no object named {c.name}"
    if c.kind == "group":
        obj = objects[c.name]
        ok = obj["kind"] == "group" and set(obj["members"]) == set(c.members)
        return ok, "" if ok else f"{c.name} is not a group of exactly {', '.join(c.members)}"
    if c.kind == "rotation":
        rot = objects[c.name]["rotation"]
        if abs(rot[2][2] - 1) > 1e-6:
            return False, f"{c.name} is not upright"
        yaw = math.degrees(math.atan2(rot[1][0], rot[0][0]))
        off = (yaw - c.yaw) % c.period
        ok = min(off, c.period - off) <= c.tol_deg
        return ok, "" if ok else f"{c.name} is turned {yaw:.1f} degrees about z"
    if c.name not in boxes:
        return False, f"{c.name} has no size"
    a = boxes[c.name]
    if c.kind == "object" and c.extent is not None and c.center is not None:
        if objects[c.name]["kind"] != c.shape:
            return False, f"{c.name} is a {objects[c.name]['kind']}, not a {c.shape}"
        extent = [a[1][i] - a[0][i] for i in range(3)]
        ok = all(abs(extent[i] - c.extent[i]) <= c.tol for i in range(3))
        if not ok:
            return False, f"{c.name}'s extent is {_fmt(extent)} m"
        ok = all(abs(_centre(a)[i] - c.center[i]) <= c.tol for i in range(3))
        return ok, "" if ok else f"{c.name}'s centre is at {_fmt(_centre(a))} m"
    if c.kind == "on_floor":
        ok = abs(a[0][2]) <= c.tol
        return ok, "" if ok else f"{c.name}'s bottom is at z = {a[0][2]:.3f} m"
    if c.other not in boxes:
        return False, f"there is no object named {c.other}"
    b = boxes[c.other]
    ca, cb = _centre(a), _centre(b)
    if c.kind == "on_top_of":
        over = all(b[0][i] - c.tol <= ca[i] <= b[1][i] + c.tol for i in range(2))
        if c.centred:
            over = all(abs(ca[i] - cb[i]) <= c.tol for i in range(2))
        ok = abs(a[0][2] - b[1][2]) <= c.tol and over
        return ok, "" if ok else f"{c.name} does not rest on top of {c.other}" + (", centred" if c.centred else "")
    if c.kind == "next_to" and c.side is not None:
        axis, across = (0, 1) if c.side[1] == "x" else (1, 0)
        gap = a[0][axis] - b[1][axis] if c.side[0] == "+" else b[0][axis] - a[1][axis]
        ok = abs(gap - c.gap) <= c.tol and abs(ca[across] - cb[across]) <= c.tol
        return ok, "" if ok else f"{c.name} is not {c.gap:g} m beyond the {c.side} side of {c.other}, level with it"
    if c.kind == "under_corner" and c.corner is not None:
        ok = abs(a[1][2] - b[0][2]) <= c.tol
        for axis, sign in ((0, c.corner[0]), (1, c.corner[2])):
            ok = ok and (
                abs(a[0][axis] - b[0][axis]) <= c.tol if sign == "-" else abs(a[1][axis] - b[1][axis]) <= c.tol
            )
        return ok, "" if ok else f"{c.name} is not under the {c.corner} corner of {c.other}, flush with it"
    if c.kind == "inside":
        within = all(b[0][i] - c.tol <= a[0][i] and a[1][i] <= b[1][i] + c.tol for i in range(3))
        ok = within and abs(a[0][2] - b[0][2]) <= c.tol
        return ok, "" if ok else f"{c.name} is not inside {c.other}, resting on its bottom"
    axis, across = (0, 1) if c.axis == "x" else (1, 0)
    ok = (abs(ca[axis] - cb[axis] - c.spacing) <= c.tol and abs(ca[across] - cb[across]) <= c.tol
          and abs(a[0][2] - b[0][2]) <= c.tol)  # fmt: skip
    return ok, "" if ok else f"{c.name} is not {c.spacing:g} m from {c.other} along {c.axis}, in line with it"


def judge_scene(checks: list[SceneCheck], text: str) -> tuple[list[CaseOutcome], dict[str, float], str | None]:
    """(one outcome per check, one component per check, why the scene is malformed or None)."""
    try:
        objects = parse_scene(text)
    except SceneError as e:
        return [CaseOutcome(index=-1, passed=False, detail=f"the final scene is malformed: {e}")], {}, str(e)
    boxes = world_boxes(objects)
    cases, components = [], {}
    for i, check in enumerate(checks):
        ok, why = check_scene(check, objects, boxes)
        cases.append(CaseOutcome(index=i, passed=ok, detail=why))
        components[f"scene:{i}:{check.kind}:{check.name}"] = float(ok)
    return cases, components, None


async def grade_scene(task: Task, answer: Any, sandbox: SandboxAPI, limits: Limits | None = None) -> SceneGrade:
    """Run the answer's calls on the scene API in the sandbox, read the final scene back and check
    it here (see the module doc)."""
    assert task.api is not None
    try:
        checks = scene_checks(task)
    except ValueError as e:
        raise InvalidTask(f"task {task.id}: {e}") from None
    out = SceneGrade(total=len(checks))
    calls, _ = candidate_turns(answer, len(task.api.turns))
    made = sum(len(turn) for turn in calls)
    if not made:
        out.no_answer = "no_calls: no call could be read from the answer"
        return out
    if made > MAX_CALLS:
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=f"{made} calls: a scene takes at most {MAX_CALLS}"))
        return out
    turns = [*calls[:-1], [*calls[-1], {"name": "list_objects", "arguments": {}}]]
    run = await run_api_calls(task, turns, sandbox, limits, observe_from=made, states="none")
    if run.infrastructure_error is not None:
        out.infrastructure_error = run.infrastructure_error
        return out
    texts = run.observations() if run.problem is None else []
    if not texts or texts[-1].startswith("Error during execution"):
        why = run.problem or (texts[-1][:300] if texts else "the scene was not reported")
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=f"no final scene: {why}"))
        return out
    out.cases, out.components, _ = judge_scene(checks, texts[-1])
    placed = [case.passed for case, check in zip(out.cases, checks, strict=False) if check.kind == "object"]
    if len(out.cases) == len(checks) and placed and not any(placed):
        why = "no object is where it belongs (no 'object' check holds): the scene earns nothing"
        out.cases.append(CaseOutcome(index=-1, passed=False, detail=why))
        return out
    out.passed = sum(c.passed for c in out.cases)
    return out


def trivial_scene_candidates(task: Task) -> list[tuple[str, str]]:
    """(name, completion) pairs that must earn nothing on a scene task: no call, a claim, the
    question echoed as JSON, and every object of the gold made with its size at the origin."""
    origin = [
        {"name": c["name"], "arguments": {k: v for k, v in c["arguments"].items() if k not in ("x", "y", "z")}}
        for turn in gold_turns(task)
        for c in turn
        if c["name"].startswith("create_")
    ]
    return [
        ("no call", "I cannot do that with these tools."),
        ("empty", ""),
        ("claims success", "Done: the scene is built exactly as described, every check passes."),
        ("question echoed", json.dumps({"question": task.prompt_text()})),
        ("objects at the origin", json.dumps({"turns": [[origin]]})),
    ]
