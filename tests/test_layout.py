"""The import graph goes one way (``../shared/ARCHITECTURE.md``): a package never imports one
listed after it, at module level or inside a function."""

from __future__ import annotations

import ast
import sys
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
    "dashboard",
    "cli",
]
# Modules at the top of the package, by the layer they belong to.
TOP_LEVEL = {"errors": "errors", "user_files": "errors", "client": "service"}
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


# What runs inside the sandbox lives in modules of its own (``*/programs/``), never in a string.
PROGRAM_LINES_MAX = 20
# The modules a program may import besides the standard library: the shared ones it is shipped with
# (``dojo.sandbox.bundle``) and what the environment it runs in provides.
PROGRAM_IMPORTS = {
    "rewards/programs/harness.py": {
        "dojo.tasks.values",
        "dojo.sandbox.guest.wire",
        "dojo.sandbox.guest.ending",
        "dojo.sandbox.guest.trusted",
    },
    "rewards/programs/shell_check.py": {"dojo.sandbox.guest.trusted"},
    "sandbox/programs/python_main.py": {"dojo.sandbox.guest.ending"},
    "rewards/programs/repo_driver.py": {"pytest"},
    "rewards/programs/repo_plugin.py": {"pytest", "_pytest"},
    "tasks/programs/tau2_adapter.py": {"tau2", "loguru"},
    "tasks/programs/data_warmup.py": {"pandas", "pyarrow"},
    "tasks/programs/scipy_warmup.py": {"numpy", "scipy"},
    "tasks/programs/documents_warmup.py": {"docx", "openpyxl"},
}
SHARED_MODULES = {  # written once
    "dojo.tasks.values",
    "dojo.sandbox.guest.wire",
    "dojo.sandbox.guest.ending",
    "dojo.sandbox.guest.trusted",
}


def python_program(text: str) -> bool:
    """Whether ``text`` is Python code with a statement in it (not prose, not a data literal)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return False
    return any(not isinstance(node, ast.Expr) for node in tree.body)


def docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
    }


def test_no_string_constant_holds_a_program() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text())
        skip = docstrings(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in skip:
                continue
            if len(node.value.splitlines()) > PROGRAM_LINES_MAX and python_program(node.value):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} ({len(node.value.splitlines())} lines)")
    assert found == [], "program text belongs in a module of a programs/ folder (dojo.sandbox.bundle ships it)"


def test_a_sandbox_program_imports_only_the_standard_library_and_what_it_is_shipped_with() -> None:
    programs = sorted(p for p in ROOT.glob("*/programs/*.py") if p.name != "__init__.py")
    assert {str(p.relative_to(ROOT)) for p in programs} >= set(PROGRAM_IMPORTS)
    shared = [ROOT / (name.removeprefix("dojo.").replace(".", "/") + ".py") for name in SHARED_MODULES]
    wrong = []
    for path in [*programs, *shared]:
        rel = str(path.relative_to(ROOT))
        allowed = PROGRAM_IMPORTS.get(rel, set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [(a.name, False) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [(node.module, True)]
            else:
                continue
            for name, from_form in names:
                top = name.split(".")[0]
                if name in SHARED_MODULES & allowed and from_form:
                    continue  # (``from dojo.x import y`` only: the module stands alone in sys.modules)
                if top in sys.stdlib_module_names or top == "__future__" or top in allowed:
                    continue
                wrong.append(f"{rel}:{node.lineno} imports {name}")
    assert wrong == []


def test_the_harness_carries_the_shared_modules_it_imports() -> None:
    from dojo.rewards.harness import harness_source

    source = harness_source()
    shipped = {name for name in SHARED_MODULES if repr(name) in source}
    assert shipped == PROGRAM_IMPORTS["rewards/programs/harness.py"]
    compile(source, "harness", "exec", dont_inherit=True)


def test_no_source_file_is_over_700_lines() -> None:
    """A reader opens one file for one idea (issue #35: the 2,266-line zygote); past 700 lines,
    split it by what its parts do."""
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > 700}
    assert long == {}
