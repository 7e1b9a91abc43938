"""The import graph goes one way (``../shared/ARCHITECTURE.md``): a package never imports one
listed after it, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import dojo

ORDER = [
    "errors",
    "sandbox",
    "cluster",
    "tasks",
    "rewards",
    "service",
    "agent",
    "rollout",
    "integrations",
    "train",
    "cli",
]
# Modules at the top of the package, by the layer they belong to.
TOP_LEVEL = {"errors": "errors", "client": "service"}
ROOT = Path(dojo.__file__).parent


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "dojo" or len(parts) < 2:
        return None
    return TOP_LEVEL.get(parts[1], parts[1])


def imports(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_no_package_imports_a_later_one() -> None:
    back_arrows = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        own = TOP_LEVEL.get(rel.stem) if len(rel.parts) == 1 else rel.parts[0]
        if own is None or own not in ORDER:
            continue
        for line, module in imports(path):
            other = layer(module)
            if other in ORDER and ORDER.index(other) > ORDER.index(own):
                back_arrows.append(f"{rel}:{line} ({own}) imports {module} ({other})")
    assert back_arrows == []
