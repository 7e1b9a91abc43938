"""``family:scene3d``: build a 3D scene described in words with a scene-graph API's tools; graded by
geometry on the final scene (``dojo.rewards.scene``), outside the sandbox.

A task is a ``tools`` task with a simulated API (``Task.api``, ``check="geometry"``): the tools are
the public methods of ``dojo.tasks.scene_api.SceneAPI`` (create a box, sphere or cylinder with sizes
in a unit, move, rotate, scale, group, ungroup, delete, list), which runs in the sandbox in the
``dojo-scene`` environment. The test's ``expected`` holds the gold calls (``turns``, the reference,
never sent to a run) and the checks (``scene``: a list of ``SceneCheck``), each one component of the
reward. Every ``object`` check's size and centre come from the gold calls run here on the same API.

Levels (difficulty 0..1 in four steps): one primitive resting on the floor at a given point; two or
three objects and one relation (on top of, centred; next to, with a gap; inside, resting on the
bottom); an assembly (a table: a top on four legs flush with its corners, a lamp centred on it,
grouped; or a row of crates at a spacing with a ball on the middle one, grouped); a room (the table
grouped and turned about the vertical axis, moved to a point, a lamp on it, a chair next to it, a
ball inside a crate), lengths in mixed units (m, cm, mm, in). Nothing is ever centred at the origin,
so creating each object with its size at the origin meets no check.
"""

from __future__ import annotations

import functools
import inspect
import json
import random
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dojo.sandbox.environment import Environment, EnvironmentStore
from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.gold_calls import api_reference, parse_call_text
from dojo.tasks.model import ApiScenario, Message, Task, TaskMetadata, TestCase
from dojo.tasks.scene_api import UNITS, SceneAPI, world_boxes

SCENE_ENVIRONMENT = "dojo-scene"
SCENE_MODULE = "dojo_scene_api"
TOLERANCE = 0.005  # metres
LEVELS = 4
CheckKind = Literal["object", "on_floor", "on_top_of", "next_to", "under_corner", "inside", "aligned", "group",
                    "rotation"]  # fmt: skip
SYSTEM = (
    "You build 3D scenes with a scene-graph API. Axes: x to the right, y away from you, z up; the floor is "
    "z = 0. A box has width along x, depth along y and height along z; a cylinder stands upright; an "
    "object's position is its centre (a group's: its pivot, the centre of its members' bounding box when "
    "it was made). Every length argument is in the call's unit (m, cm, mm, in or ft).\n\n"
    'Write each call as <tool_call>{{"name": ..., "arguments": {{...}}}}</tool_call>; you see each '
    "call's result. When the scene is built, reply without a call.\n\nFunctions:\n{functions}"
)


class SceneCheck(BaseModel):
    """One check on the final scene (``dojo.rewards.scene`` says what each kind means)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: CheckKind
    name: str = Field(min_length=1)
    other: str | None = None
    shape: Literal["box", "sphere", "cylinder"] | None = None
    extent: list[float] | None = Field(None, min_length=3, max_length=3)
    center: list[float] | None = Field(None, min_length=3, max_length=3)
    centred: bool = False
    side: Literal["+x", "-x", "+y", "-y"] | None = None
    gap: float = Field(0.0, ge=0.0)
    corner: Literal["-x-y", "+x-y", "+x+y", "-x+y"] | None = None
    axis: Literal["x", "y"] | None = None
    spacing: float = 0.0
    members: list[str] = Field(default_factory=list)
    yaw: float = 0.0
    period: float = Field(360.0, gt=0.0, le=360.0)
    tol: float = Field(TOLERANCE, gt=0.0, le=1.0, description="Metres.")
    tol_deg: float = Field(1.0, gt=0.0, le=45.0)

    @model_validator(mode="after")
    def _needs(self) -> SceneCheck:
        needs: dict[str, tuple[str, ...]] = {"object": ("shape", "extent", "center"), "on_top_of": ("other",),
                                             "next_to": ("other", "side"), "under_corner": ("other", "corner"),
                                             "inside": ("other",), "aligned": ("other", "axis")}  # fmt: skip
        missing = [f for f in needs.get(self.kind, ()) if getattr(self, f) is None]
        if missing:
            raise ValueError(f"a {self.kind} check needs {', '.join(missing)}")
        if self.kind == "group" and not self.members:
            raise ValueError("a group check needs members")
        return self


def scene_checks(task: Task) -> list[SceneCheck]:
    """A scene task's checks; ValueError saying why they are not."""
    spec = task.tests[0].expected.get("scene") if task.tests else None
    if not isinstance(spec, list) or not spec:
        raise ValueError("a geometry task's test needs 'scene': a list of checks")
    return [SceneCheck.model_validate(c) for c in spec]


# -- the API's tools and environment -------------------------------------------------------------

_JSON_TYPES = {"str": "string", "float": "number", "bool": "boolean", "list[str]": "array"}


@functools.cache
def scene_tools() -> tuple[dict[str, Any], ...]:
    """The OpenAI tool schemas of ``SceneAPI``'s public methods, from their signatures and docstrings."""
    tools = []
    for name, method in inspect.getmembers(SceneAPI, inspect.isfunction):
        if name.startswith("_"):
            continue
        doc = inspect.getdoc(method) or ""
        summary, _, args = doc.partition("Args:")
        described = dict(re.findall(r"^\s*(\w+): (.+)$", args, re.MULTILINE))
        properties: dict[str, Any] = {}
        required = []
        for param in list(inspect.signature(method).parameters.values())[1:]:
            kind = _JSON_TYPES[str(param.annotation)]
            properties[param.name] = {"type": kind, "description": described.get(param.name, "")}
            if kind == "array":
                properties[param.name]["items"] = {"type": "string"}
            if param.name == "unit":
                properties[param.name]["enum"] = list(UNITS)
            if param.default is inspect.Parameter.empty:
                required.append(param.name)
        parameters = {"type": "object", "properties": properties, "required": required}
        tools.append({"type": "function", "function": {"name": name, "description": " ".join(summary.split()),
                                                       "parameters": parameters}})  # fmt: skip
    return tuple(tools)


def scene_environment(store: EnvironmentStore | None = None) -> Environment:
    """The environment the scene API runs in: the API's module alone (standard library), preloaded."""
    source = Path(__file__).with_name("scene_api.py").read_text()
    return (store or EnvironmentStore()).adopt(
        SCENE_ENVIRONMENT, [], preload=[SCENE_MODULE], modules={SCENE_MODULE: source}
    )


@functools.cache
def scene_environment_ref() -> str:
    return scene_environment().ref


# -- generation --------------------------------------------------------------------------------


def _num(value: float) -> str:
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


class _Scene:
    """A scene under construction: its gold calls, its description and its checks."""

    def __init__(self, rng: random.Random, unit: str) -> None:
        self.rng, self.unit = rng, unit
        self.calls: list[str] = []
        self.words: list[str] = []
        self.checks: list[dict[str, Any]] = []
        self.names: list[str] = []

    def length(self, metres: float, unit: str | None = None) -> str:
        u = unit or self.unit
        return f"{_num(metres / UNITS[u])} {u}"

    def call(self, tool: str, **args: Any) -> None:
        text = ", ".join(f"{k}={_num(v) if isinstance(v, float) else repr(v)}" for k, v in args.items())
        self.calls.append(f"{tool}({text})")

    def create(self, kind: str, name: str, size: dict[str, float], at: list[float]) -> None:
        """Create in the scene's unit (sizes and position in metres)."""
        u = UNITS[self.unit]
        self.call(f"create_{kind}", name=name, **{k: v / u for k, v in size.items()},
                  x=at[0] / u, y=at[1] / u, z=at[2] / u, unit=self.unit)  # fmt: skip
        self.names.append(name)

    def check(self, kind: str, name: str, **fields: Any) -> None:
        self.checks.append({"kind": kind, "name": name, **fields})

    def objects_checked(self, names: list[str] | None = None) -> None:
        """An ``object`` check for each named primitive, its size and centre from the gold calls."""
        api = SceneAPI()
        for text in self.calls:
            call = parse_call_text(text)
            getattr(api, call["name"])(*call["args"], **call["arguments"])
        scene = {o["name"]: o for o in api.list_objects()["objects"]}
        boxes = world_boxes(scene)
        for name in names or self.names:
            lo, hi = boxes[name]
            extent = [round(hi[i] - lo[i], 6) for i in range(3)]
            centre = [round((hi[i] + lo[i]) / 2, 6) for i in range(3)]
            self.check("object", name, shape=scene[name]["kind"], extent=extent, center=centre, tol=TOLERANCE)


def _point(rng: random.Random) -> tuple[float, float]:
    """A point on the floor (metres, to the centimetre), away from the origin."""
    while True:
        x, y = rng.randint(-400, 400) / 100, rng.randint(-400, 400) / 100
        if abs(x) + abs(y) >= 0.5:
            return x, y


def _cm(rng: random.Random, low: int, high: int) -> float:
    return rng.randint(low, high) / 100


def _primitive(s: _Scene, name: str, at_xy: tuple[float, float], base_z: float = 0.0) -> tuple[str, dict[str, float]]:
    """A random primitive resting at height ``base_z`` over ``at_xy``; its description."""
    kind = s.rng.choice(("box", "sphere", "cylinder"))
    if kind == "box":
        size = {"width": _cm(s.rng, 20, 150), "depth": _cm(s.rng, 20, 150), "height": _cm(s.rng, 10, 120)}
        what = f"a box {s.length(size['width'])} wide (x), {s.length(size['depth'])} deep (y) and " \
               f"{s.length(size['height'])} high"  # fmt: skip
        h = size["height"]
    elif kind == "sphere":
        size = {"radius": _cm(s.rng, 5, 60)}
        what, h = f"a sphere of radius {s.length(size['radius'])}", 2 * size["radius"]
    else:
        size = {"radius": _cm(s.rng, 5, 60), "height": _cm(s.rng, 10, 150)}
        what = f"an upright cylinder of radius {s.length(size['radius'])} and height {s.length(size['height'])}"
        h = size["height"]
    s.create(kind, name, size, [at_xy[0], at_xy[1], base_z + h / 2])
    return what, size


def _one_object(s: _Scene) -> None:
    x, y = _point(s.rng)
    what, _ = _primitive(s, "item", (x, y))
    s.words.append(f"Make {what}, named item, resting on the floor with its centre above the point "
                   f"x = {s.length(x)}, y = {s.length(y)}.")  # fmt: skip
    s.objects_checked()
    s.check("on_floor", "item", tol=TOLERANCE)


def _pair(s: _Scene) -> None:
    x, y = _point(s.rng)
    relation = s.rng.choice(("on_top_of", "next_to", "inside"))
    if relation == "inside":
        w, d, h = _cm(s.rng, 60, 150), _cm(s.rng, 60, 150), _cm(s.rng, 50, 120)
        s.create("box", "crate", {"width": w, "depth": d, "height": h}, [x, y, h / 2])
        r = _cm(s.rng, 5, int(min(w, d, h) * 100) // 2 - 5)
        s.create("sphere", "ball", {"radius": r}, [x, y, r])
        s.words.append(f"Make a box named crate, {s.length(w)} wide, {s.length(d)} deep and {s.length(h)} high, "
                       f"resting on the floor with its centre above x = {s.length(x)}, y = {s.length(y)}; it marks "
                       f"a crate's volume. Put a sphere named ball, of radius {s.length(r)}, inside the crate, "
                       "resting on its bottom in the middle.")  # fmt: skip
        s.objects_checked()
        s.check("inside", "ball", other="crate", tol=TOLERANCE)
        return
    what, _ = _primitive(s, "base", (x, y))
    top = world_boxes({"base": _last_object(s)})["base"][1][2]
    if relation == "on_top_of":
        other, _ = _primitive(s, "top", (x, y), top)
        s.words.append(f"Make {what}, named base, resting on the floor with its centre above x = {s.length(x)}, "
                       f"y = {s.length(y)}. On top of it, centred, put {other}, named top.")  # fmt: skip
        s.objects_checked()
        s.check("on_top_of", "top", other="base", centred=True, tol=TOLERANCE)
    else:
        side, gap = s.rng.choice(("+x", "-x", "+y", "-y")), _cm(s.rng, 0, 80)
        lo, hi = world_boxes({"base": _last_object(s)})["base"]
        w, d, h = _cm(s.rng, 20, 100), _cm(s.rng, 20, 100), _cm(s.rng, 20, 100)
        axis = 0 if side[1] == "x" else 1
        half = (w if axis == 0 else d) / 2
        centre = [x, y, h / 2]
        centre[axis] = hi[axis] + gap + half if side[0] == "+" else lo[axis] - gap - half
        s.create("box", "neighbour", {"width": w, "depth": d, "height": h}, centre)
        where = {"+x": "to its right (+x)", "-x": "to its left (-x)", "+y": "behind it (+y)",
                 "-y": "in front of it (-y)"}[side]  # fmt: skip
        s.words.append(f"Make {what}, named base, resting on the floor with its centre above x = {s.length(x)}, "
                       f"y = {s.length(y)}. Then a box named neighbour, {s.length(w)} wide, {s.length(d)} deep and "
                       f"{s.length(h)} high, on the floor {where}, leaving a gap of {s.length(gap)} between them, "
                       "its centre level with base's across.")  # fmt: skip
        s.objects_checked()
        s.check("next_to", "neighbour", other="base", side=side, gap=gap, tol=TOLERANCE)
    s.check("on_floor", "base", tol=TOLERANCE)


def _last_object(s: _Scene) -> dict[str, Any]:
    call = parse_call_text(s.calls[-1])
    api = SceneAPI()
    getattr(api, call["name"])(*call["args"], **call["arguments"])
    return dict(api.list_objects()["objects"][0])


CORNERS = ("-x-y", "+x-y", "+x+y", "-x+y")


def _table(s: _Scene, at: tuple[float, float], yaw: int = 0) -> dict[str, float]:
    """A table (top on four legs flush with its corners, grouped as ``table``) centred over ``at``,
    turned ``yaw`` degrees about z; a lamp centred on it. Returns its dimensions."""
    w, d = _cm(s.rng, 80, 200), _cm(s.rng, 60, 120)
    if abs(w - d) < 0.1:
        d = w - 0.2
    t, height, leg = _cm(s.rng, 2, 6), _cm(s.rng, 60, 100), _cm(s.rng, 4, 10)
    build = (0.0, 0.0) if yaw else at
    s.create("box", "top", {"width": w, "depth": d, "height": t}, [build[0], build[1], height - t / 2])
    for i, corner in enumerate(CORNERS, start=1):
        cx = build[0] + (1 if corner[0] == "+" else -1) * (w - leg) / 2
        cy = build[1] + (1 if corner[2] == "+" else -1) * (d - leg) / 2
        s.create("box", f"leg{i}", {"width": leg, "depth": leg, "height": height - t}, [cx, cy, (height - t) / 2])
    s.call("group", name="table", members=["top", "leg1", "leg2", "leg3", "leg4"])
    legs = ", ".join(f"leg{i} under the {c} corner" for i, c in enumerate(CORNERS, start=1))
    s.words.append(f"Make a table: a top named top, {s.length(w)} along x, {s.length(d)} along y and "
                   f"{s.length(t)} thick, whose upper surface is {s.length(height)} above the floor, on four square "
                   f"legs {s.length(leg)} thick, standing on the floor flush with the top's corners ({legs}). "
                   "Group the top and the legs as table.")  # fmt: skip
    if yaw:
        s.call("rotate", name="table", axis="z", degrees=float(yaw))
        u = UNITS[s.unit]
        s.call("move", name="table", x=at[0] / u, y=at[1] / u, z=height / 2 / u, unit=s.unit)
        s.words.append(f"Build it as described, then turn the whole table {yaw} degrees counter-clockwise (seen from "
                       f"above) about the vertical axis through its centre, and place it with its centre above "
                       f"x = {s.length(at[0])}, y = {s.length(at[1])} (legs on the floor).")  # fmt: skip
    else:
        s.words.append(f"The table's centre is above x = {s.length(at[0])}, y = {s.length(at[1])}.")
    r, lh = _cm(s.rng, 5, 15), _cm(s.rng, 20, 50)
    s.create("cylinder", "lamp", {"radius": r, "height": lh}, [at[0], at[1], height + lh / 2])
    s.words.append(f"Stand a lamp, an upright cylinder named lamp of diameter {s.length(2 * r, 'mm')} and height "
                   f"{s.length(lh)}, on the table's top, centred.")  # fmt: skip
    return {"w": w, "d": d, "height": height}


def _assembly(s: _Scene) -> None:
    if s.rng.random() < 0.5:
        _table(s, _point(s.rng))
        s.objects_checked()
        for i, corner in enumerate(CORNERS, start=1):
            s.check("under_corner", f"leg{i}", other="top", corner=corner, tol=TOLERANCE)
        s.check("on_top_of", "lamp", other="top", centred=True, tol=TOLERANCE)
        s.check("group", "table", members=["top", "leg1", "leg2", "leg3", "leg4"])
        return
    x, y = _point(s.rng)
    w, d, h = _cm(s.rng, 30, 60), _cm(s.rng, 30, 60), _cm(s.rng, 30, 60)
    spacing = w + _cm(s.rng, 10, 50)
    for i in range(3):
        s.create("box", f"crate{i + 1}", {"width": w, "depth": d, "height": h}, [x + i * spacing, y, h / 2])
    r = _cm(s.rng, 5, int(min(w, d) * 100) // 2)
    s.create("sphere", "ball", {"radius": r}, [x + spacing, y, h + r])
    s.call("group", name="row", members=["crate1", "crate2", "crate3"])
    s.words.append(f"Make a row of three equal boxes named crate1, crate2 and crate3, each {s.length(w)} wide, "
                   f"{s.length(d)} deep and {s.length(h)} high, on the floor along x, their centres "
                   f"{s.length(spacing, 'mm')} apart, crate1 leftmost with its centre above x = {s.length(x)}, "
                   f"y = {s.length(y)}. Put a sphere named ball, of radius {s.length(r)}, on top of crate2, centred. "
                   "Group the three crates as row.")  # fmt: skip
    s.objects_checked()
    s.check("aligned", "crate2", other="crate1", axis="x", spacing=spacing, tol=TOLERANCE)
    s.check("aligned", "crate3", other="crate2", axis="x", spacing=spacing, tol=TOLERANCE)
    s.check("on_top_of", "ball", other="crate2", centred=True, tol=TOLERANCE)
    s.check("group", "row", members=["crate1", "crate2", "crate3"])


def _room(s: _Scene) -> None:
    at = _point(s.rng)
    yaw = s.rng.choice((90, 45, 30, 60, 120))
    size = _table(s, at, yaw)
    cw, cd, ch = (s.rng.randint(low, high) * UNITS["in"] for low, high in ((15, 24), (15, 24), (16, 36)))
    reach = _top_reach(size, yaw)
    gap = _cm(s.rng, 10, 40)
    scene_unit, s.unit = s.unit, "in"
    s.create("box", "chair", {"width": cw, "depth": cd, "height": ch}, [at[0] + reach + gap + cw / 2, at[1], ch / 2])
    s.words.append(f"Put a box named chair, {s.length(cw)} wide, {s.length(cd)} deep and {s.length(ch)} high, on the "
                   f"floor to the right (+x) of the table's top, {s.length(gap, 'cm')} from the top's bounding box, "
                   "its centre level with the top's across.")  # fmt: skip
    s.unit = scene_unit
    cx, cy = round(at[0] - reach - 1.0, 2), at[1]
    cw2, ch2 = _cm(s.rng, 50, 90), _cm(s.rng, 40, 80)
    s.create("box", "crate", {"width": cw2, "depth": cw2, "height": ch2}, [cx, cy, ch2 / 2])
    r = _cm(s.rng, 5, int(min(cw2, ch2) * 100) // 2 - 5)
    s.create("sphere", "ball", {"radius": r}, [cx, cy, r])
    s.words.append(f"Finally a box named crate, {s.length(cw2)} square and {s.length(ch2)} high, on the floor with its "
                   f"centre above x = {s.length(cx)}, y = {s.length(cy)}, and a sphere named ball of radius "
                   f"{s.length(r)} inside it, resting on its bottom in the middle.")  # fmt: skip
    s.objects_checked(["top", "leg1", "leg3", "lamp", "chair", "crate", "ball"])
    s.check("rotation", "top", yaw=float(yaw), period=180.0, tol_deg=1.0)
    s.check("group", "table", members=["top", "leg1", "leg2", "leg3", "leg4"])
    s.check("on_top_of", "lamp", other="top", centred=True, tol=TOLERANCE)
    s.check("next_to", "chair", other="top", side="+x", gap=gap, tol=TOLERANCE)
    s.check("inside", "ball", other="crate", tol=TOLERANCE)
    for name in ("leg2", "leg4"):
        s.check("on_floor", name, tol=TOLERANCE)


def _top_reach(size: dict[str, float], yaw: int) -> float:
    """Half the extent along x of the table's top turned ``yaw`` degrees."""
    api = SceneAPI()
    api.create_box("t", size["w"], size["d"], 0.01)
    api.rotate("t", "z", float(yaw))
    lo, hi = world_boxes({o["name"]: o for o in api.list_objects()["objects"]})["t"]
    return (hi[0] - lo[0]) / 2


BUILDERS = (_one_object, _pair, _assembly, _room)


class SceneFamily:
    """See the module doc."""

    name = "scene3d"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, LEVELS)
        scene = _Scene(rng, rng.choice(("cm", "cm", "m", "mm")) if level else "cm")
        BUILDERS[level](scene)
        request = " ".join(scene.words) + " Use exactly these names."
        tools = list(scene_tools())
        api = ApiScenario(classes=["SceneAPI"], modules={"SceneAPI": SCENE_MODULE}, turns=[request], check="geometry")
        task = Task(
            id="scene3d",
            domain="tool_calling",
            form="tools",
            prompt=[
                Message(role="system", content=SYSTEM.format(functions=json.dumps([t["function"] for t in tools]))),
                Message(role="user", content=request),
            ],
            tools=tools,
            api=api,
            tests=[TestCase(expected={"turns": [scene.calls], "scene": scene.checks})],
            environment=scene_environment_ref(),
            metadata=TaskMetadata(source="family:scene3d", difficulty=round(difficulty, 3),
                                  tags=[f"level{level + 1}", scene.unit]),
        )  # fmt: skip
        return task.model_copy(update={"reference": api_reference(task)})


register_family(SceneFamily())
