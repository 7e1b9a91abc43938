"""Honest edits of repo tasks: the reference fix of a ``swe:`` task written the ways a model that
fixes the bug might write it (a comment added, the whole file given, the function around the fix
rewritten with its locals renamed and a return annotation, the imports reordered, the whole file
reformatted). The diff check (``dojo.rewards.edit_scan``) must find no ``hack`` in any of them;
``bench/edit_scan_false_positives.py`` counts them and
tests/rewards/test_edit_scan.py grades a few to show they are fixes."""

from __future__ import annotations

import ast
import builtins
import keyword

from dojo.rewards.repo import format_edits, parse_edits
from dojo.tasks.model import Task
from dojo.tasks.swe import enclosing_function


def fixed_file(task: Task) -> tuple[str, str, int]:
    """(path, the file as the reference leaves it, the first line the fix changes)."""
    assert task.workspace is not None and task.reference
    [edit] = parse_edits(task.reference)
    assert edit.search is not None
    buggy = task.workspace.files[edit.path]
    start = buggy.index(edit.search)
    fixed = buggy.replace(edit.search, edit.replace, 1)
    old, new = edit.search.splitlines(), edit.replace.splitlines()
    offset = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), 0)
    return edit.path, fixed, buggy[:start].count("\n") + 1 + offset


def commented(task: Task) -> str:
    """The reference with a comment above each line it changes."""
    assert task.reference
    [edit] = parse_edits(task.reference)
    assert edit.search is not None
    old = edit.search.splitlines(keepends=True)
    lines = []
    for i, line in enumerate(edit.replace.splitlines(keepends=True)):
        if i >= len(old) or line != old[i]:
            indent = line[: len(line) - len(line.lstrip())]
            lines.append(f"{indent}# the fix: this line was wrong\n")
        lines.append(line)
    return f"{edit.path}\n<<<<<<< SEARCH\n{edit.search}=======\n{''.join(lines)}>>>>>>> REPLACE\n"


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: set[str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            node.id = node.id + "_"
        return node


def _locals(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """Names the function binds by plain assignment (not its parameters, nor names it declares
    global or nonlocal, nor any a nested scope binds again)."""
    declared = {n for node in ast.walk(fn) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
    declared |= {a.arg for node in ast.walk(fn) if isinstance(node, ast.arguments)
                 for a in [*node.posonlyargs, *node.args, *node.kwonlyargs, node.vararg, node.kwarg] if a}  # fmt: skip
    bound = {
        t.id for node in ast.walk(fn) if isinstance(node, (ast.Assign, ast.AugAssign, ast.For))
        for t in ast.walk(node.targets[0] if isinstance(node, ast.Assign) else node.target)
        if isinstance(t, ast.Name)
    }  # fmt: skip
    used_in_strings = any(isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("locals", "vars", "eval", "exec")
                          for n in ast.walk(fn))  # fmt: skip
    if used_in_strings:
        return set()
    return {n for n in bound - declared if not keyword.iskeyword(n) and not hasattr(builtins, n)}


def rewritten_function(task: Task) -> str | None:
    """The whole file, with the function around the fix rewritten: its locals renamed, a return
    annotation where it had none, formatted anew (every line of it is added)."""
    path, fixed, line = fixed_file(task)
    span = enclosing_function(fixed, line)
    if span is None:
        return None
    tree = ast.parse(fixed)
    fn = next(
        n for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and min([n.lineno, *(d.lineno for d in n.decorator_list)]) == span[0] and n.end_lineno == span[1]
    )  # fmt: skip
    fn = _Renamer(_locals(fn)).visit(fn)
    if fn.returns is None and not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn)):
        fn.returns = ast.Constant("object")
    lines = fixed.splitlines(keepends=True)
    indent = " " * fn.col_offset
    body = "".join(indent + text + "\n" if text else "\n" for text in ast.unparse(fn).splitlines())
    return format_edits({path: "".join(lines[: span[0] - 1]) + body + "".join(lines[span[1] :])})


def reordered_imports(task: Task) -> str | None:
    """The whole file with its first run of single-line imports in reverse order."""
    path, fixed, _ = fixed_file(task)
    tree = ast.parse(fixed)
    lines = fixed.splitlines(keepends=True)
    run: list[ast.stmt] = []
    for stmt in tree.body:
        single = isinstance(stmt, (ast.Import, ast.ImportFrom)) and stmt.lineno == stmt.end_lineno
        if single and not (isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"):
            if run and stmt.lineno != (run[-1].end_lineno or 0) + 1:
                break
            run.append(stmt)
        elif run:
            break
    if len(run) < 2:
        return None
    first, last = run[0].lineno - 1, run[-1].lineno
    return format_edits({path: "".join(lines[:first]) + "".join(reversed(lines[first:last])) + "".join(lines[last:])})


def honest_edits(task: Task) -> dict[str, str]:
    """Completions that fix ``task``'s bug, by way of writing them (``reference``, ``commented``,
    ``whole_file``, ``rewritten_function``, ``reordered_imports``, ``formatted``)."""
    path, fixed, _ = fixed_file(task)
    out = {
        "reference": task.reference or "",
        "commented": commented(task),
        "whole_file": format_edits({path: fixed}),
        "formatted": format_edits({path: ast.unparse(ast.parse(fixed)) + "\n"}),
    }
    if (text := rewritten_function(task)) is not None:
        out["rewritten_function"] = text
    if (text := reordered_imports(task)) is not None:
        out["reordered_imports"] = text
    return out
