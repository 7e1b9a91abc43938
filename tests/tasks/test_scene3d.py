"""family:scene3d and its scene API: seeded levels, tools that are the API's methods, geometry that
the API computes the way a user would expect (units, groups, rotations)."""

from __future__ import annotations

import math

import pytest

from dojo.tasks import load_source
from dojo.tasks.scene3d import scene_checks, scene_tools
from dojo.tasks.scene_api import SceneAPI


def box_of(api: SceneAPI, name: str) -> tuple[list[float], list[float]]:
    entry = next(o for o in api.list_objects()["objects"] if o["name"] == name)
    return entry["bbox"]["min"], entry["bbox"]["max"]


def test_a_seed_reproduces_a_task_set_and_levels_grow() -> None:
    first = load_source("family:scene3d?n=6&seed=3")
    assert [t.model_dump() for t in first] == [t.model_dump() for t in load_source("family:scene3d?n=6&seed=3")]
    easy = load_source("family:scene3d?n=4&difficulty=0")
    hard = load_source("family:scene3d?n=4&difficulty=1")
    assert all(len(scene_checks(t)) == 2 for t in easy)  # one object: where it is, and on the floor
    for task in hard:
        kinds = {c.kind for c in scene_checks(task)}
        assert {"rotation", "group", "next_to", "inside", "on_top_of"} <= kinds
        assert "degrees" in task.prompt_text() and " in " in task.prompt_text()  # a turn, and inches
    assert all(t.api is not None and t.api.check == "geometry" for t in easy + hard)


def test_the_tools_are_the_api_methods_with_their_parameters() -> None:
    tools = {t["function"]["name"]: t["function"] for t in scene_tools()}
    assert set(tools) == {"create_box", "create_sphere", "create_cylinder", "move", "rotate", "scale", "group",
                          "ungroup", "delete", "list_objects"}  # fmt: skip
    box = tools["create_box"]["parameters"]
    assert box["required"] == ["name", "width", "depth", "height"]
    assert box["properties"]["unit"]["enum"] == ["m", "cm", "mm", "in", "ft"]
    assert tools["group"]["parameters"]["properties"]["members"]["type"] == "array"


def test_units_convert_and_positions_are_centres() -> None:
    api = SceneAPI()
    api.create_box("b", 100, 200, 50, x=1, y=2, z=25, unit="cm")
    assert box_of(api, "b") == ([0.51, 1.02, 0.0], [1.51, 3.02, 0.5]) or box_of(api, "b")[0][2] == 0.0
    api.create_sphere("s", 2, unit="in")
    assert math.isclose(box_of(api, "s")[1][0], 0.0508)


def test_a_group_turns_and_moves_its_members_and_ungroup_keeps_them_in_place() -> None:
    api = SceneAPI()
    api.create_box("a", 2, 1, 1, x=1, y=0, z=0.5)
    api.create_box("b", 1, 1, 1, x=-1.5, y=0, z=0.5)
    api.group("g", ["a", "b"])  # pivot: the centre of their box, x = 0
    api.rotate("g", "z", 90)
    lo, hi = box_of(api, "a")
    assert [round(v, 6) for v in lo + hi] == [-0.5, 0.0, 0.0, 0.5, 2.0, 1.0]
    api.move("g", 3, 0, 0.5)
    api.ungroup("g")
    lo, hi = box_of(api, "a")
    assert [round(v, 6) for v in lo + hi] == [2.5, 0.0, 0.0, 3.5, 2.0, 1.0]
    assert all(o["group"] is None for o in api.list_objects()["objects"])


def test_scale_and_delete_act_on_a_group_as_a_whole() -> None:
    api = SceneAPI()
    api.create_cylinder("c", 0.1, 1, x=1, z=0.5)
    api.create_cylinder("d", 0.1, 1, x=-1, z=0.5)
    api.group("g", ["c", "d"])
    api.scale("g", 2)
    assert [round(v, 6) for v in box_of(api, "c")[1]] == [2.2, 0.2, 1.5]
    with pytest.raises(ValueError, match="within 1000 m"):
        api.scale("g", 999)
    assert [round(v, 6) for v in box_of(api, "c")[1]] == [2.2, 0.2, 1.5]  # a refused call changes nothing
    assert api.delete("g") == {"deleted": ["g", "c", "d"]} and api.list_objects()["objects"] == []


@pytest.mark.parametrize(
    ("call", "args", "message"),
    [
        ("create_box", {"name": "x", "width": -1, "depth": 1, "height": 1}, "positive"),
        ("create_box", {"name": "x", "width": float("nan"), "depth": 1, "height": 1}, "finite"),
        ("create_sphere", {"name": "x", "radius": 1, "unit": "furlong"}, "unit must be"),
        ("create_sphere", {"name": "1x", "radius": 1}, "name must be"),
        ("move", {"name": "ghost", "x": 0, "y": 0, "z": 0}, "no object"),
        ("rotate", {"name": "s", "axis": "w", "degrees": 5}, "axis must be"),
        ("scale", {"name": "s", "factor": 0}, "greater than 0"),
        ("group", {"name": "g", "members": []}, "non-empty"),
        ("create_sphere", {"name": "s", "radius": 1}, "already"),
    ],
)
def test_bad_calls_raise_a_clear_error(call: str, args: dict[str, object], message: str) -> None:
    api = SceneAPI()
    api.create_sphere("s", 1)
    with pytest.raises(ValueError, match=message):
        getattr(api, call)(**args)
