"""Single-line mutants of Python source: the bugs of ``swe:`` tasks and the mutation score of a
task's tests (``dojo tasks audit --mutants``).

Kinds: ``operator`` (``+``/``-``, ``<``/``<=``, ``==``/``!=``, ``and``/``or``, ...), ``off_by_one``
(an integer literal +-1), ``wrong_branch`` (an ``if``/``while`` condition negated),
``removed_statement`` (an assignment or call replaced by ``pass``), ``swapped_arguments`` (the first
two positional arguments of a call). Each mutant changes one line and still compiles, so the line
it came from is its fix.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

KINDS = ("operator", "off_by_one", "wrong_branch", "removed_statement", "swapped_arguments")
_SWAP_OPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.LShift: ast.RShift, ast.RShift: ast.LShift, ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd, ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
    ast.NotIn: ast.In, ast.And: ast.Or, ast.Or: ast.And,
}  # fmt: skip
_OP_TEXT: dict[type, str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%", ast.LShift: "<<",
    ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
    ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
    ast.And: "and", ast.Or: "or",
}  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One single-line change of a source file: ``line`` (1-based) becomes ``mutated``."""

    file: str
    line: int
    original: str
    mutated: str
    kind: str


def _span(node: ast.AST) -> tuple[int, int, int] | None:
    """(line, start, end) of a node that sits on one line (columns are UTF-8 byte offsets)."""
    line, end_line = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    start, end = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if line is None or line != end_line or start is None or end is None:
        return None
    return line, start, end


class _Sites:
    """Collects a source's mutants: each a change of bytes [start, end) of one line."""

    def __init__(self, file: str, source: str) -> None:
        self.file = file
        self.lines = source.splitlines(keepends=True)
        self.found: list[Mutant] = []

    def text(self, line: int, start: int, end: int) -> str:
        return self.lines[line - 1].encode()[start:end].decode(errors="replace")

    def add(self, line: int, start: int, end: int, text: str, kind: str) -> None:
        original = self.lines[line - 1]
        raw = original.encode()
        mutated = (raw[:start] + text.encode() + raw[end:]).decode(errors="replace")
        if mutated != original:
            self.found.append(Mutant(self.file, line, original, mutated, kind))

    def swap_operator(self, left: ast.AST, right: ast.AST, op: ast.AST, whole: bool) -> None:
        """The operator between ``left`` and ``right`` (the only text between them when ``whole``)."""
        a, b = _span(left), _span(right)
        if a is None or b is None or a[0] != b[0] or type(op) not in _SWAP_OPS:
            return
        between = self.text(a[0], a[2], b[1])
        old, new = _OP_TEXT[type(op)], _OP_TEXT[_SWAP_OPS[type(op)]]
        if (between.strip() == old) if whole else (between.count(old) == 1 and (old != "/" or "//" not in between)):
            self.add(a[0], a[2], b[1], between.replace(old, new), "operator")


def mutants(file: str, source: str) -> list[Mutant]:
    """Every single-line mutant of ``source`` that still compiles, in source order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    sites = _Sites(file, source)
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module))
        and n.body and isinstance(n.body[0], ast.Expr)
    }  # fmt: skip
    for node in ast.walk(tree):
        span = _span(node)
        if isinstance(node, ast.BinOp):
            sites.swap_operator(node.left, node.right, node.op, whole=False)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1:
            sites.swap_operator(node.left, node.comparators[0], node.ops[0], whole=True)
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            sites.swap_operator(node.values[0], node.values[1], node.op, whole=True)
        elif isinstance(node, ast.Constant) and type(node.value) is int and span and id(node) not in docstrings:
            if sites.text(*span).isdigit() and node.value < 1 << 16:
                sites.add(*span, str(node.value + 1), "off_by_one")
                if node.value > 0:
                    sites.add(*span, str(node.value - 1), "off_by_one")
        elif isinstance(node, (ast.If, ast.While)) and (test := _span(node.test)):
            if (
                isinstance(node.test, ast.UnaryOp)
                and isinstance(node.test.op, ast.Not)
                and (inner := _span(node.test.operand))
            ):
                sites.add(*test, sites.text(*inner), "wrong_branch")
            else:
                sites.add(*test, f"not ({sites.text(*test)})", "wrong_branch")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr)) and span:
            if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call):
                continue  # docstrings and bare names: removing them changes nothing
            line = sites.lines[span[0] - 1]
            indent = line[: len(line) - len(line.lstrip())]
            if len(indent.encode()) == span[1] and line.rstrip().endswith(sites.text(*span).rstrip()[-1:]):
                sites.found.append(Mutant(file, span[0], line, f"{indent}pass\n", "removed_statement"))
        if isinstance(node, ast.Call) and len(node.args) >= 2 and span:
            a, b = _span(node.args[0]), _span(node.args[1])
            if a and b and a[0] == b[0] and not any(isinstance(x, ast.Starred) for x in node.args[:2]):
                ta, tb, between = sites.text(*a), sites.text(*b), sites.text(a[0], a[2], b[1])
                if ta != tb and between.strip() == ",":
                    sites.add(a[0], a[1], b[2], f"{tb}{between}{ta}", "swapped_arguments")
    valid = []
    seen = set()
    for m in sites.found:
        if (m.line, m.mutated) in seen:
            continue
        seen.add((m.line, m.mutated))
        changed = "".join(sites.lines[: m.line - 1]) + m.mutated + "".join(sites.lines[m.line :])
        try:
            compile(changed, file, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        valid.append(m)
    return sorted(valid, key=lambda m: (m.line, m.kind, m.mutated))


def apply_mutant(source: str, m: Mutant) -> str:
    lines = source.splitlines(keepends=True)
    if lines[m.line - 1] != m.original:
        raise ValueError(f"{m.file}:{m.line} is not the line the mutant was made from")
    lines[m.line - 1] = m.mutated
    return "".join(lines)
