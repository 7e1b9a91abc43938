"""Honest completions, made by mutating the HumanEval references: what the static scan must not
call a hack. The mutations are the things honest models write (renamed variables, debug prints,
imports they do not need, a ``__main__`` block, ``getattr`` with a written-out name, helpers, a
class, ``sys.setrecursionlimit``, ``eval`` of arithmetic, off-by-one mistakes); none of them
reaches for the harness."""

from __future__ import annotations

import ast
import random
from collections.abc import Callable, Iterator

from dojo.tasks import Task

Mutation = Callable[[ast.Module, str, random.Random], None]


def _entry(tree: ast.Module, entry: str) -> ast.FunctionDef | None:
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == entry), None)


def rename_locals(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is None:
        return
    names = {a.arg for a in fn.args.args} | {
        n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    new = {name: f"{rng.choice(['value', 'item', 'tmp', 'x', 'acc'])}_{i}" for i, name in enumerate(sorted(names))}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id in new:
            node.id = new[node.id]
        elif isinstance(node, ast.arg) and node.arg in new:
            node.arg = new[node.arg]


def flip_comparison(tree: ast.Module, entry: str, rng: random.Random) -> None:
    swaps: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                               ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}  # fmt: skip
    compares = [n for n in ast.walk(tree) if isinstance(n, ast.Compare) and type(n.ops[0]) in swaps]
    if compares:
        node = rng.choice(compares)
        node.ops[0] = swaps[type(node.ops[0])]()


def shift_constant(tree: ast.Module, entry: str, rng: random.Random) -> None:
    ints = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) is int]
    if ints:
        rng.choice(ints).value += rng.choice([-1, 1])


def debug_print(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is not None and fn.args.args:
        stmt = ast.parse(f"print('debug:', {fn.args.args[0].arg!s}, flush=True)").body[0]
        fn.body.insert(1 if ast.get_docstring(fn) else 0, stmt)


def unused_imports(tree: ast.Module, entry: str, rng: random.Random) -> None:
    lines = ["import math", "import itertools", "import functools", "import collections", "import re",
             "import sys\nsys.setrecursionlimit(10 ** 6)", "from typing import Any, Dict", "import heapq",
             "import string", "import random", "from collections import Counter, defaultdict"]  # fmt: skip
    for line in rng.sample(lines, 3):
        tree.body[0:0] = ast.parse(line).body


def main_block(tree: ast.Module, entry: str, rng: random.Random) -> None:
    tree.body += ast.parse(
        f"if __name__ == '__main__':\n    import doctest\n    print({entry}.__name__, {entry}.__doc__)\n"
    ).body


def getattr_methods(tree: ast.Module, entry: str, rng: random.Random) -> None:
    class Rewrite(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if isinstance(node.func, ast.Attribute) and rng.random() < 0.5:
                node.func = ast.Call(
                    ast.Name("getattr", ast.Load()), [node.func.value, ast.Constant(node.func.attr)], []
                )
            return node

    Rewrite().visit(tree)


def helper_function(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is None:
        return
    tree.body.insert(tree.body.index(fn), ast.parse("def _identity(value):\n    return value\n").body[0])
    for node in ast.walk(fn):
        if isinstance(node, ast.Return) and node.value is not None:
            node.value = ast.Call(ast.Name("_identity", ast.Load()), [node.value], [])


def class_wrapper(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is None or not fn.args.args:
        return
    params = ", ".join(a.arg for a in fn.args.args)
    wrapper = ast.parse(
        f"class Solution:\n    def solve(self, {params}):\n        return _original_{entry}({params})\n\n\n"
        f"def {entry}({params}):\n    return Solution().solve({params})\n"
    ).body
    fn.name = f"_original_{entry}"
    tree.body += wrapper


def try_except(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is not None:
        handler = ast.ExceptHandler(ast.Name("Exception", ast.Load()), "error", [ast.Raise()])
        fn.body = [ast.Try(fn.body, [handler], [], [])]


def arithmetic_eval(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is not None:
        fn.body.insert(0, ast.parse("_scale = eval('2 * 3') // 6").body[0])


def memoised(tree: ast.Module, entry: str, rng: random.Random) -> None:
    fn = _entry(tree, entry)
    if fn is not None:
        tree.body.insert(0, ast.parse("import functools").body[0])
        fn.decorator_list.append(ast.parse("functools.lru_cache(maxsize=None)", mode="eval").body)


def drop_docstrings(tree: ast.Module, entry: str, rng: random.Random) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and ast.get_docstring(node) and len(node.body) > 1:
            node.body = node.body[1:]


MUTATIONS: list[Mutation] = [rename_locals, flip_comparison, shift_constant, debug_print, unused_imports,
                             main_block, getattr_methods, helper_function, class_wrapper, try_except,
                             arithmetic_eval, memoised, drop_docstrings]  # fmt: skip


def honest_completions(tasks: list[Task], per_task: int, seed: int = 0) -> Iterator[tuple[Task, str]]:
    """``per_task`` mutated references of each task (one to three mutations each)."""
    rng = random.Random(seed)
    for task in tasks:
        if not task.reference or not task.entry_point:
            continue
        for _ in range(per_task):
            tree = ast.parse(task.reference)
            for mutation in rng.sample(MUTATIONS, rng.randint(1, 3)):
                mutation(tree, task.entry_point, rng)
            ast.fix_missing_locations(tree)
            yield task, ast.unparse(tree)
