"""The scene-graph API of ``family:scene3d``: boxes, spheres and cylinders with sizes in units,
moved, rotated, scaled, grouped and deleted; its public methods are the tools a model calls.

One module, two uses. In the sandbox it is the simulated API (``Task.api``): written into the
``dojo-scene`` environment as the module ``dojo_scene_api`` and run by the simulated-API driver
(``dojo.rewards.programs.api_driver``) on the candidate's calls, which are JSON data. On the host
its geometry functions (``world_boxes``, ``half_extents``, ``rotation_about``) compute what the
grader compares (``dojo.rewards.scene``). Standard library only.

The model of a scene: every object has a kind (``box``: width along x, depth along y, height
along z; ``sphere``: radius; ``cylinder``: radius, height along its own z axis; ``group``: members),
a position and a rotation, both given and reported in world terms, in metres. A primitive's
position is its centre; a group's is its pivot, the centre of its members' bounding box when it
was made. ``rotate`` turns an object about a world axis through its own position (a group's members
turn with it); ``scale`` multiplies sizes (a group's: its members' sizes and their offsets from its
pivot); ``ungroup`` leaves every member where it is in the world. ``list_objects`` reports each
object with its world axis-aligned bounding box.
"""

from __future__ import annotations

import math
import re
from typing import Any

UNITS: dict[str, float] = {"m": 1.0, "cm": 0.01, "mm": 0.001, "in": 0.0254, "ft": 0.3048}
SHAPES = ("box", "sphere", "cylinder")
KINDS = (*SHAPES, "group")
AXES = {"x": 0, "y": 1, "z": 2}
MAX_OBJECTS = 200
MAX_METRES = 1000.0  # no size or coordinate beyond (in metres)
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
SIZE_KEYS: dict[str, tuple[str, ...]] = {"box": ("width", "depth", "height"), "sphere": ("radius",),
                                         "cylinder": ("radius", "height"), "group": ()}  # fmt: skip

Vector = list[float]
Matrix = list[list[float]]
IDENTITY: Matrix = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def rotation_about(axis: str, degrees: float) -> Matrix:
    """The rotation matrix of ``degrees`` (counter-clockwise, right-handed) about a world axis."""
    a = math.radians(degrees)
    c, s = math.cos(a), math.sin(a)
    if abs(c) < 1e-15:
        c = 0.0
    if abs(s) < 1e-15:
        s = 0.0
    if axis == "x":
        return [[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]
    if axis == "y":
        return [[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]]
    return [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]


def matmul(a: Matrix, b: Matrix) -> Matrix:
    return [[sum(a[i][k] * b[k][j] for k in range(3)) for j in range(3)] for i in range(3)]


def transpose(m: Matrix) -> Matrix:
    return [[m[j][i] for j in range(3)] for i in range(3)]


def apply(m: Matrix, v: Vector) -> Vector:
    return [sum(m[i][k] * v[k] for k in range(3)) for i in range(3)]


def half_extents(kind: str, size: dict[str, float], rotation: Matrix) -> Vector:
    """Half the size of a primitive's world axis-aligned bounding box along x, y and z."""
    if kind == "sphere":
        return [size["radius"]] * 3
    if kind == "box":
        half = [size["width"] / 2, size["depth"] / 2, size["height"] / 2]
        return [sum(abs(rotation[i][k]) * half[k] for k in range(3)) for i in range(3)]
    axis = [rotation[i][2] for i in range(3)]  # the cylinder's own z axis, in the world
    r, h = size["radius"], size["height"] / 2
    return [r * math.sqrt(max(0.0, 1.0 - axis[i] ** 2)) + h * abs(axis[i]) for i in range(3)]


def world_boxes(objects: dict[str, dict[str, Any]]) -> dict[str, tuple[Vector, Vector]]:
    """Each object's world bounding box (min corner, max corner): a primitive's from its kind,
    size, position and rotation; a group's the union of its members' (a group with none has none).
    ``objects`` as ``list_objects`` reports them (world position and rotation)."""
    boxes: dict[str, tuple[Vector, Vector]] = {}
    for name, obj in objects.items():
        if obj["kind"] in SHAPES:
            half = half_extents(obj["kind"], obj["size"], obj["rotation"])
            centre = obj["position"]
            boxes[name] = ([centre[i] - half[i] for i in range(3)], [centre[i] + half[i] for i in range(3)])

    def group_box(name: str, depth: int) -> tuple[Vector, Vector] | None:
        if name in boxes:
            return boxes[name]
        if depth > MAX_OBJECTS:
            return None
        parts = [b for m in objects[name].get("members", []) if m in objects and (b := group_box(m, depth + 1))]
        if not parts:
            return None
        box = ([min(p[0][i] for p in parts) for i in range(3)], [max(p[1][i] for p in parts) for i in range(3)])
        boxes[name] = box
        return box

    for name, obj in objects.items():
        if obj["kind"] == "group":
            group_box(name, 0)
    return boxes


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _metres(value: Any, unit: Any, what: str, *, positive: bool = False) -> float:
    if not isinstance(unit, str) or unit not in UNITS:
        raise ValueError(f"unit must be one of {', '.join(UNITS)}, got {unit!r}")
    metres = _number(value, what) * UNITS[unit]
    if positive and metres <= 0:
        raise ValueError(f"{what} must be positive, got {value!r}")
    if abs(metres) > MAX_METRES:
        raise ValueError(f"{what} must lie within {MAX_METRES:g} m, got {value!r} {unit}")
    return metres


def _rounded(values: Vector) -> Vector:
    return [round(v, 9) + 0.0 for v in values]


class SceneAPI:
    """A scene of named objects (see the module doc). Each public method is one tool."""

    def __init__(self) -> None:
        # name -> {"kind", "size", "position", "rotation", "parent", "members"}: position and
        # rotation relative to the parent (the world for a top-level object)
        self.objects: dict[str, dict[str, Any]] = {}

    def _load_scenario(self, config: dict[str, Any], long_context: bool = False) -> None:
        """Start from an empty scene (a task's scene is built by its calls)."""
        self.objects = {}

    # -- tools ---------------------------------------------------------------------------------

    def create_box(self, name: str, width: float, depth: float, height: float, x: float = 0.0, y: float = 0.0,
                   z: float = 0.0, unit: str = "m") -> dict[str, Any]:  # fmt: skip
        """Create a box: width along x, depth along y, height along z, its centre at (x, y, z).

        Args:
            name: A new object's name (a letter, then letters, digits, _ or -).
            width: Size along x.
            depth: Size along y.
            height: Size along z (up).
            x: The centre's x.
            y: The centre's y.
            z: The centre's z (height above the floor, z = 0).
            unit: The unit of every length given: m, cm, mm, in or ft.
        """
        size = {
            "width": _metres(width, unit, "width", positive=True),
            "depth": _metres(depth, unit, "depth", positive=True),
            "height": _metres(height, unit, "height", positive=True),
        }
        return self._create(name, "box", size, x, y, z, unit)

    def create_sphere(self, name: str, radius: float, x: float = 0.0, y: float = 0.0, z: float = 0.0,
                      unit: str = "m") -> dict[str, Any]:  # fmt: skip
        """Create a sphere of the given radius, its centre at (x, y, z).

        Args:
            name: A new object's name.
            radius: The radius.
            x: The centre's x.
            y: The centre's y.
            z: The centre's z.
            unit: The unit of every length given: m, cm, mm, in or ft.
        """
        return self._create(name, "sphere", {"radius": _metres(radius, unit, "radius", positive=True)}, x, y, z, unit)

    def create_cylinder(self, name: str, radius: float, height: float, x: float = 0.0, y: float = 0.0,
                        z: float = 0.0, unit: str = "m") -> dict[str, Any]:  # fmt: skip
        """Create an upright cylinder (its axis along z), its centre at (x, y, z).

        Args:
            name: A new object's name.
            radius: The radius.
            height: The height (along z).
            x: The centre's x.
            y: The centre's y.
            z: The centre's z.
            unit: The unit of every length given: m, cm, mm, in or ft.
        """
        size = {
            "radius": _metres(radius, unit, "radius", positive=True),
            "height": _metres(height, unit, "height", positive=True),
        }
        return self._create(name, "cylinder", size, x, y, z, unit)

    def move(self, name: str, x: float, y: float, z: float, unit: str = "m", relative: bool = False) -> dict[str, Any]:
        """Move an object (a group with its members) so that its position is (x, y, z), or by
        (x, y, z) when relative is true. A primitive's position is its centre, a group's its pivot.

        Args:
            name: The object.
            x: The new x (or the change in x).
            y: The new y (or the change in y).
            z: The new z (or the change in z).
            unit: The unit of x, y and z: m, cm, mm, in or ft.
            relative: Move by (x, y, z) instead of to it.
        """
        obj = self._get(name)
        target = [_metres(v, unit, axis) for v, axis in zip((x, y, z), "xyz", strict=True)]
        position = self._world(name)[0]
        if not isinstance(relative, bool):
            raise ValueError("relative must be true or false")
        if relative:
            target = [position[i] + target[i] for i in range(3)]
        if any(abs(v) > MAX_METRES for v in target):
            raise ValueError(f"positions must lie within {MAX_METRES:g} m of the origin")
        obj["position"] = self._local_position(obj["parent"], target)
        return self._summary(name)

    def rotate(self, name: str, axis: str, degrees: float) -> dict[str, Any]:
        """Turn an object about a world axis through its own position (counter-clockwise, seen
        from the axis' positive end); a group's members turn with it.

        Args:
            name: The object.
            axis: x, y or z.
            degrees: The angle in degrees.
        """
        obj = self._get(name)
        if axis not in AXES:
            raise ValueError(f"axis must be x, y or z, got {axis!r}")
        turn = rotation_about(axis, _number(degrees, "degrees"))
        _, rotation = self._world(name)
        world = matmul(turn, rotation)
        parent = self._world(obj["parent"])[1] if obj["parent"] else IDENTITY
        obj["rotation"] = matmul(transpose(parent), world)
        return self._summary(name)

    def scale(self, name: str, factor: float) -> dict[str, Any]:
        """Scale an object by a factor (a group: its members' sizes and their distances from its
        pivot), keeping its position.

        Args:
            name: The object.
            factor: The factor (greater than 0).
        """
        self._get(name)
        f = _number(factor, "factor")
        if not 0 < f <= 1000:
            raise ValueError(f"factor must be greater than 0 (and at most 1000), got {factor!r}")
        sizes = [v for n in self._subtree(name) for v in self.objects[n]["size"].values()]
        if max(sizes, default=0.0) * f > MAX_METRES:  # (checked first: a refused call changes nothing)
            raise ValueError(f"sizes must stay within {MAX_METRES:g} m")
        self._scale(name, f, 0)
        return self._summary(name)

    def group(self, name: str, members: list[str]) -> dict[str, Any]:
        """Group objects that are not in a group yet; the group's pivot is the centre of their
        bounding box. Moving, rotating or scaling the group moves, turns or scales its members.

        Args:
            name: The new group's name.
            members: The names of the objects to group.
        """
        self._new_name(name)
        if not isinstance(members, list) or not members or not all(isinstance(m, str) for m in members):
            raise ValueError("members must be a non-empty list of object names")
        if len(set(members)) != len(members):
            raise ValueError("members must be distinct")
        for m in members:
            if self._get(m)["parent"] is not None:
                raise ValueError(f"{m} is already in group {self.objects[m]['parent']}; ungroup it first")
        boxes = world_boxes(self._world_objects())
        parts = [boxes[m] for m in members if m in boxes]
        if not parts:
            raise ValueError("a group needs at least one member with a size")
        pivot = [(min(p[0][i] for p in parts) + max(p[1][i] for p in parts)) / 2 for i in range(3)]
        for m in members:
            obj = self.objects[m]
            obj["position"] = [obj["position"][i] - pivot[i] for i in range(3)]
            obj["parent"] = name
        self.objects[name] = {"kind": "group", "size": {}, "position": pivot, "rotation": [r[:] for r in IDENTITY],
                              "parent": None, "members": list(members)}  # fmt: skip
        return self._summary(name)

    def ungroup(self, name: str) -> dict[str, Any]:
        """Dissolve a group: its members stay where they are in the world and leave the group.

        Args:
            name: The group.
        """
        group = self._get(name)
        if group["kind"] != "group":
            raise ValueError(f"{name} is a {group['kind']}, not a group")
        for m in group["members"]:
            position, rotation = self._world(m)
            self.objects[m].update(position=self._local_position(group["parent"], position), parent=group["parent"],
                                   rotation=self._local_rotation(group["parent"], rotation))  # fmt: skip
        if group["parent"] is not None:
            siblings = self.objects[group["parent"]]["members"]
            siblings[siblings.index(name) : siblings.index(name) + 1] = group["members"]
        del self.objects[name]
        return {"ungrouped": name, "members": list(group["members"])}

    def delete(self, name: str) -> dict[str, Any]:
        """Delete an object (a group with all its members).

        Args:
            name: The object.
        """
        obj = self._get(name)
        gone = self._subtree(name)
        for n in gone:
            del self.objects[n]
        if obj["parent"] is not None:
            self.objects[obj["parent"]]["members"].remove(name)
        return {"deleted": gone}

    def list_objects(self) -> dict[str, Any]:
        """Every object: kind, size, world position and rotation, group, and world bounding box, in metres."""
        return {"unit": "m", "objects": [self._summary(n) for n in self.objects]}

    # -- the model -----------------------------------------------------------------------------

    def _create(
        self, name: str, kind: str, size: dict[str, float], x: Any, y: Any, z: Any, unit: str
    ) -> dict[str, Any]:
        self._new_name(name)
        position = [_metres(v, unit, axis) for v, axis in zip((x, y, z), "xyz", strict=True)]
        self.objects[name] = {"kind": kind, "size": size, "position": position,
                              "rotation": [r[:] for r in IDENTITY], "parent": None, "members": []}  # fmt: skip
        return self._summary(name)

    def _new_name(self, name: Any) -> None:
        if not isinstance(name, str) or not NAME.match(name):
            raise ValueError(f"name must be a letter then up to 63 letters, digits, _ or -, got {name!r}")
        if name in self.objects:
            raise ValueError(f"there is already an object named {name}")
        if len(self.objects) >= MAX_OBJECTS:
            raise ValueError(f"a scene holds at most {MAX_OBJECTS} objects")

    def _get(self, name: Any) -> dict[str, Any]:
        if not isinstance(name, str) or name not in self.objects:
            raise ValueError(f"there is no object named {name!r}")
        return self.objects[name]

    def _world(self, name: str) -> tuple[Vector, Matrix]:
        """An object's world position and rotation."""
        obj = self.objects[name]
        if obj["parent"] is None:
            return list(obj["position"]), [r[:] for r in obj["rotation"]]
        position, rotation = self._world(obj["parent"])
        offset = apply(rotation, obj["position"])
        return [position[i] + offset[i] for i in range(3)], matmul(rotation, obj["rotation"])

    def _local_position(self, parent: str | None, world: Vector) -> Vector:
        if parent is None:
            return list(world)
        position, rotation = self._world(parent)
        return apply(transpose(rotation), [world[i] - position[i] for i in range(3)])

    def _local_rotation(self, parent: str | None, world: Matrix) -> Matrix:
        return world if parent is None else matmul(transpose(self._world(parent)[1]), world)

    def _subtree(self, name: str) -> list[str]:
        out = [name]
        for m in self.objects[name]["members"]:
            out += self._subtree(m)
        return out

    def _scale(self, name: str, factor: float, depth: int) -> None:
        obj = self.objects[name]
        if depth:
            obj["position"] = [v * factor for v in obj["position"]]
        obj["size"] = {k: v * factor for k, v in obj["size"].items()}
        for m in obj["members"]:
            self._scale(m, factor, depth + 1)

    def _world_objects(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name, obj in self.objects.items():
            position, rotation = self._world(name)
            out[name] = {**obj, "position": position, "rotation": rotation}
        return out

    def _summary(self, name: str) -> dict[str, Any]:
        obj = self.objects[name]
        position, rotation = self._world(name)
        entry: dict[str, Any] = {
            "name": name,
            "kind": obj["kind"],
            "size": {k: round(v, 9) for k, v in obj["size"].items()},
            "position": _rounded(position),
            "rotation": [_rounded(row) for row in rotation],
            "group": obj["parent"],
            "members": list(obj["members"]),
        }
        box = world_boxes(self._world_objects()).get(name) if obj["kind"] == "group" else None
        if obj["kind"] in SHAPES:
            half = half_extents(obj["kind"], obj["size"], rotation)
            box = ([position[i] - half[i] for i in range(3)], [position[i] + half[i] for i in range(3)])
        entry["bbox"] = {"min": _rounded(box[0]), "max": _rounded(box[1])} if box else None
        return entry
