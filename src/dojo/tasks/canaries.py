"""Canary twins of a repo task's scored test: what makes a forged test report detectable.

A repository's tests call its code in their own process, so the candidate's code can make pytest's
report say anything (docs/threat-model.md). What it cannot do is tell which tests are real. For a
scored test that compares with a literal (``assert f(x) == 5``, ``self.assertEqual(f(x), "ab")``),
each grading writes ``COPIES`` copies of the test into its file in place of the test, under names
in one style (``test_f_1`` ... ``test_f_20``): each has the test's decorators and signature and one
statement, a call of the test's body (``_test_f``, the test with that literal read from a parameter)
with its own value. One copy passes the package's value: it is the scored test (the *twin*); the
others are *canaries*. (One body, not twenty: pytest rewrites a test's assertions once.) The
values, the order and which copy is the twin are drawn anew for every grading (``canary_group``),
so that nothing a policy can learn across episodes names the twin.

The rule (``dojo.rewards.repo.canary_verdict``): for any code, a copy that expects ``5`` and one
that expects ``6`` of the same expression cannot both pass, so a report in which the twin and a
canary both pass is forged; a canary that passes alone is a wrong answer. A forger that makes one
copy pass, picked at random, is right with probability ``1 / COPIES``.

The values are drawn so that the package's value is not the odd one out: integers and decimals
form a window of consecutive values (in the literal's own precision) in which the original's rank
is uniform; strings are variants of the string (``canary_strings``), then other strings of the file;
dotted names are other dotted names of the file, those the test writes as much as the site's first.
A literal's other sites in the test that expect the same value change with it (they read the same
parameter), so the test's body does not write the twin's value beside the copies; where that leaves
too few values for the copies, they stay as they are. Not a dotted name's: what the bug reports for
one is not recorded, and pyflakes/0031's copies that wrote one message type at all four places the
test expects ``m.UndefinedName`` passed on the bug, which reports that type at each (an audit,
2026-12-07).
Which literal a test's canaries
change (its *site*, an index into ``literal_sites``) is chosen when the task is made and checked by
running (``dojo.rewards.canary_check``): every canary fails on the reference fix and on the tree as
given, the twin passes on the reference.
"""

from __future__ import annotations

import ast
import copy
import functools
import math
import random
import re
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Literal

from dojo.tasks.canary_strings import (
    file_words,
    share_written,
    string_variants,
    test_parts,
)

COPIES = 20  # the twin and 19 canaries: a forger that picks one copy at random gets 1/20 = 0.05 of the reward


@dataclass(frozen=True)
class TestNode:
    """A pytest node id taken apart: ``path::Class::name[params]``."""

    __test__ = False  # not a pytest class
    path: str
    cls: str | None
    name: str
    params: str = ""

    @classmethod
    def parse(cls, node: str) -> TestNode:
        path, _, rest = node.partition("::")
        parts = rest.split("::") if rest else []
        if not path.endswith(".py") or not parts or len(parts) > 2:
            raise ValueError(f"{node!r} is not a test node id of the form path.py::[Class::]test")
        last = parts[-1]
        name, bracket, params = last.partition("[")
        if not name.isidentifier() or (len(parts) == 2 and not parts[0].isidentifier()):
            raise ValueError(f"{node!r} is not a test node id of the form path.py::[Class::]test")
        return cls(path, parts[0] if len(parts) == 2 else None, name, bracket + params)

    def renamed(self, name: str) -> str:
        return "::".join([self.path, *([self.cls] if self.cls else []), name + self.params])

    def __str__(self) -> str:
        return self.renamed(self.name)


@dataclass(frozen=True)
class Site:
    """A value a test expects, written out in an equality assertion: what its canaries change."""

    line: int  # 1-based
    start: int  # byte offsets in that line
    end: int
    value: int | float | str
    kind: SiteKind = "literal"  # "name": a dotted name (``m.UndefinedName``), its text in ``value``


SiteKind = Literal["literal", "name"]
# Names that build a value from values (an expected object, written out): ``D({1: 11})``,
# ``DocstringInfo(summary="x")``; a lower-case call is the code under test.
VALUE_BUILDERS = frozenset({"set", "frozenset", "dict", "list", "tuple"})
# Test helpers that compare their arguments from this index on with what the code did, by equality
# of the whole list: pyflakes's ``self.flakes(source, *expected_message_types)``.
EXPECTING_HELPERS = {"flakes": 1}


@functools.lru_cache(maxsize=32)
def _parse(source: str) -> ast.Module | None:
    """``source``'s tree, once per text (a grading parses its test file several times; the tree is
    only read). None when it is not Python."""
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


@functools.lru_cache(maxsize=32)
def _defined_names(source: str) -> frozenset[str]:
    tree = _parse(source)
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return frozenset(n.name for n in ast.walk(tree) if isinstance(n, kinds)) if tree is not None else frozenset()


def _function(tree: ast.Module, node: TestNode) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    body: list[ast.stmt] = tree.body
    if node.cls is not None:
        owner = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == node.cls), None)
        if owner is None:
            return None
        body = owner.body
    found = [s for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == node.name]
    return found[-1] if found else None  # (a later definition replaces an earlier one, as in Python)


def _dotted(node: ast.expr) -> bool:
    """``m.Name``: a name looked up in a module (a message type, an enum member)."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)


def _value(node: ast.expr, top: bool = True) -> bool:
    """A value written out: a constant (a negative number), a list, tuple, set or dict of values,
    an object built from values (``Point(1, 2)``), and inside those a dotted name."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return True
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return all(_value(e, False) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _value(k, False) for k in node.keys) and all(_value(v, False) for v in node.values)
    if isinstance(node, ast.Call):
        name = _call_name(node)
        builder = name in VALUE_BUILDERS or name[:1].isupper()
        return builder and all(_value(a, False) for a in [*node.args, *(k.value for k in node.keywords)])
    return not top and _dotted(node)


def _changeable(node: ast.expr) -> list[tuple[ast.expr, int | float | str, SiteKind]]:
    """The parts of a written-out value that a canary may change: numbers and strings (not
    booleans), dotted names; dict values, not keys."""
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float, str)):
            return []
        return [(node, v, "literal")]
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        v = node.operand.value
        return [(node, -v, "literal")] if isinstance(v, (int, float)) and not isinstance(v, bool) else []
    if _dotted(node):
        return [(node, ast.unparse(node), "name")]
    parts: list[ast.expr] = []
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        parts = node.elts
    elif isinstance(node, ast.Dict):
        parts = [v for v in node.values if v is not None]
    elif isinstance(node, ast.Call):
        parts = [*node.args, *(k.value for k in node.keywords)]
    return [c for p in parts for c in _changeable(p)]


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _compared(node: ast.AST) -> list[ast.expr]:
    """The two sides an assertion compares by equality: ``assert a == b``, or a helper named
    ``*equal*`` (``assertEqual``, ``nodes_equal``; not ``assertNotEqual``); else none."""
    if isinstance(node, ast.Assert) and isinstance(node.test, ast.Compare):
        if len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq):
            return [node.test.left, node.test.comparators[0]]
    elif isinstance(node, ast.Call):
        lowered = _call_name(node).lower()
        if "equal" in lowered and "not" not in lowered and len(node.args) >= 2:
            return list(node.args[:2])
    return []


def _expectations(node: ast.AST) -> list[ast.expr]:
    """What an assertion statement or call expects, when written out: the value side of what it
    compares (``_compared``), or an ``EXPECTING_HELPERS`` call's expected arguments."""
    if isinstance(node, ast.Call) and (start := EXPECTING_HELPERS.get(_call_name(node))) is not None:
        return [a for a in node.args[start:] if _dotted(a) or _value(a)]
    written = [s for s in _compared(node) if _value(s)]
    return written if len(written) == 1 else []


def _bound_values(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Names the test binds once to a written-out value and reads only as an expectation
    (``expected = {...}`` ... ``assert f() == expected``): the value stands for the name."""
    bound: dict[str, list[ast.expr]] = {}
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
            bound.setdefault(sub.targets[0].id, []).append(sub.value)
    expecting: set[int] = set()
    for sub in ast.walk(fn):
        for side in _expectation_names(sub):
            expecting.add(id(side))
    out = {}
    for name, values in bound.items():
        if len(values) != 1 or not _value(values[0]):
            continue
        reads = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
        if reads and all(id(r) in expecting for r in reads):
            out[name] = values[0]
    return out


def _expectation_names(node: ast.AST) -> list[ast.Name]:
    """The bare name an assertion compares by equality (``_compared``), the other side neither a
    name nor a written-out value: compared with a value, the name holds what the code computed
    (``lines = WrappedJoin(['rice', ...])`` ... ``assertEqual(['rice | beans |', ...], lines)``),
    and a canary that changed the value bound to it changed the code's input, not what it is
    expected to give. Until 2026-12-07 such inputs were canaried (a CamelCase function's call reads
    as an object built from values): each copy computed something else, and a forger that picked the
    copy whose result matched the test's written-out value found the twin (an adversary, 2026-12-07)."""
    compared = _compared(node)
    names = [s for s in compared if isinstance(s, ast.Name)]
    if len(names) != 1:
        return []
    return [] if any(_value(s) for s in compared if s is not names[0]) else names


def _expected(fn: ast.FunctionDef | ast.AsyncFunctionDef, plain: bool = False) -> list[ast.expr]:
    """The written-out values ``fn``'s assertions expect (``_expectations``, and values bound to a
    name they compare, ``_bound_values``); ``plain``: only those a plain ``==`` compares (``assert``,
    ``PLAIN_EQUALS``), none bound to a name. Not the decorators: a parametrized test's ids come from
    them."""
    found: list[ast.expr] = [] if plain else [*_bound_values(fn).values()]
    for stmt in fn.body:
        for sub in ast.walk(stmt):
            if (
                not plain
                or isinstance(sub, ast.Assert)
                or (isinstance(sub, ast.Call) and _call_name(sub) in PLAIN_EQUALS)
            ):
                found += _expectations(sub)
    return found


@functools.lru_cache(maxsize=256)
def literal_sites(source: str, node: TestNode) -> list[Site]:
    """The expected values of ``node``'s function that its canaries may change, in source order.
    Empty when the test has none (or is not in ``source``)."""
    tree = _parse(source)
    fn = None if tree is None else _function(tree, node)
    if fn is None:
        return []
    sites = set()
    for side in _expected(fn):
        for part, value, kind in _changeable(side):
            if part.end_lineno != part.lineno or part.end_col_offset is None:
                continue  # a string over several lines
            sites.add(Site(part.lineno, part.col_offset, part.end_col_offset, value, kind))
    return sorted(sites, key=lambda s: (s.line, s.start))


def statements_before(source: str, node: TestNode, site: int) -> int:
    """How many of the test's top-level statements run before the one that holds ``site``: a canary
    fails there, so the fewer, the cheaper its copies (a site after a process pool is made costs a
    pool per copy)."""
    tree = _parse(source)
    fn = None if tree is None else _function(tree, node)
    sites = literal_sites(source, node)
    if fn is None or not 0 <= site < len(sites):
        return 1 << 30
    line = sites[site].line
    return sum(1 for stmt in fn.body if (stmt.end_lineno or stmt.lineno) < line)


def site_check_text(source: str, node: TestNode, site: int) -> str | None:
    """``source`` with ``node``'s test made into a check of ``site``: every top-level statement before
    the one that holds the site runs inside ``try: ... except Exception: pass`` (as a forger that
    makes each of them pass would have it), the one that holds it runs as it is, with its value
    wrapped in ``capture(index, value)`` when it is a literal (``dojo.tasks.canary_capture``), and
    nothing after it. Run on the tree as given, it tells whether the bug breaks the test at the
    site itself (``dojo.rewards.bug_mining.breaks_at_site``). None when the test or the site is not
    there."""
    tree = _parse(source)
    fn = None if tree is None else _function(tree, node)
    sites = literal_sites(source, node)
    if fn is None or not 0 <= site < len(sites):
        return None
    chosen = sites[site]
    fn = copy.deepcopy(fn)
    holds = next(i for i, stmt in enumerate(fn.body) if stmt.lineno <= chosen.line <= (stmt.end_lineno or stmt.lineno))
    wrapped = 0
    if chosen.kind == "literal":
        wrapped = _replace_sites(fn.body[holds], {(chosen.line, chosen.start, chosen.end): _captured(site)})
        if wrapped != 1:
            return None
    handler = ast.ExceptHandler(ast.Name("Exception", ast.Load()), None, [ast.Pass()])
    fn.body = [ast.Try([stmt], [handler], [], []) for stmt in fn.body[:holds]] + [fn.body[holds]]
    text = _as_source(ast.fix_missing_locations(fn))
    lines = source.splitlines(keepends=True)
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
    out = "".join([*lines[:first], text, *lines[fn.end_lineno or fn.lineno :]])
    out += "" if out.endswith("\n") else "\n"
    return out + (f"from {CAPTURE_MODULE} import capture as _dojo_capture\n" if wrapped else "")


@functools.lru_cache(maxsize=256)
def value_pool(source: str, site: Site) -> list[str]:
    """What a string or dotted-name site's canaries may expect instead: the file's other strings
    of one line, or its other dotted names on the same module."""
    tree = _parse(source)
    if tree is None:
        return []
    if site.kind == "name":
        base = str(site.value).partition(".")[0]
        names = {ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.expr) and _dotted(n)}
        return sorted(n for n in names if n.partition(".")[0] == base)
    found = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    return sorted(s for s in found if "\n" not in s and len(s) <= 80)


Value = int | float | str


def site_values(
    site: Site,
    pool: list[str],
    rng: random.Random,
    avoid: Sequence[Value] = (),
    words: Sequence[str] = (),
    written: frozenset[str] = frozenset(),
    phrases: Container[str] = frozenset(),
) -> list[Value]:
    """Up to ``COPIES`` distinct values for ``site``, its own first, none of ``avoid``. Numbers: a
    window of consecutive values in the literal's own precision, in which the original's rank is
    uniform; strings: variants of the string's shape (``canary_strings``, with ``words``, the test
    file's, keeping what the test's own text writes, ``written``, and the package's phrases,
    ``phrases``), then, where too few, others from
    ``pool`` (``value_pool``); dotted names: others from ``pool``, those the test's own text
    writes about as much as the site's first, else drawn at random."""
    value = site.value
    banned = {v for v in avoid if v != value}
    if isinstance(value, (int, float)):
        if isinstance(value, float):
            text = repr(value)
            if "e" in text or "inf" in text or "nan" in text:
                return [value]
            digits = len(text.partition(".")[2])
        step = 1 if isinstance(value, int) else 10.0**-digits
        numbers = [b for b in banned if isinstance(b, (int, float)) and not isinstance(b, bool)]
        width = COPIES  # wider by what is banned within its reach (what it takes out), not by what lies far
        # off: that widened it until the trimmed window left the twin apart from every canary (a review, 2026-12-07)
        while sum(abs(b - value) < width * step for b in numbers) + COPIES > width:
            width += 1
        r = rng.randrange(width)  # the original's rank in the window
        window = [value + j - r if isinstance(value, int) else round(value + (j - r) * 10.0**-digits, digits)
                  for j in range(width)]  # fmt: skip
        others = [v for v in dict.fromkeys(window) if v != value and v not in banned]
        while len(others) > COPIES - 1:  # trimmed at either end, at random
            others.pop(0 if rng.random() < 0.5 else -1)
        return [value, *others]
    literal = site.kind == "literal"
    shaped = string_variants(value, list(banned), words, rng, COPIES - 1, written, phrases) if literal else []
    others_s = [v for v in pool if v != value and v not in banned and v not in shaped]
    drawn = rng.sample(others_s, len(others_s))
    if not literal and written:  # names the test writes as much as it writes the twin first (a stable sort)
        drawn.sort(key=lambda v: abs(share_written(v, written) - share_written(str(value), written)))
    return [value, *shaped, *drawn[: COPIES - 1 - len(shaped)]]


def _combinations(choices: list[list[Value]], rng: random.Random) -> list[tuple[int, ...]] | None:
    """``COPIES`` distinct index tuples into ``choices`` (each site's values, its own first), the
    original's (all zeros) among them, the rest drawn at random from the grid. A tuple whose values
    are the original's in another order is never drawn: at sites of one unordered comparison
    (pyflakes sorts the message types it expects) it would expect the same. None when the grid
    has too few others."""
    grid = math.prod(len(c) for c in choices)
    if grid < COPIES:
        return None
    original = tuple(0 for _ in choices)
    same = sorted(repr(c[0]) for c in choices)
    chosen = {original}
    for _ in range(100 * COPIES):  # (a bound: a grid of permutations alone would never fill)
        if len(chosen) == COPIES:
            break
        combo = tuple(rng.randrange(len(c)) for c in choices)
        if sorted(repr(c[k]) for c, k in zip(choices, combo, strict=True)) != same:
            chosen.add(combo)
    if len(chosen) < COPIES:
        return None
    out = sorted(chosen)
    rng.shuffle(out)
    return out


@dataclass(frozen=True)
class CanaryGroup:
    """A test's copies in its file: the file's new text, the twin's node id (the test, renamed),
    the canaries' node ids, and the values at the changed sites the twin expects."""

    path: str
    text: str
    twin: str
    canaries: list[str]
    values: tuple[Value, ...]  # the twin's: what a message shown to the policy must not say
    given: tuple[tuple[str, ...], ...] = ()  # each copy's values as written, in file order (copy 1 first)
    outside: str = ""  # ``text`` without the copies: what a forger counts values in (``canary_counting``)
    body: str = ""  # the test's shared body (``_test_x``): its inputs and other assertions
    strings: bool = False  # whether a changed site is a string literal (where the package's phrases are kept)

    @property
    def members(self) -> list[str]:
        """Every copy, in file order (how the run lists them: the twin is not told apart)."""
        return sorted([self.twin, *self.canaries], key=_copy_number)


def _copy_number(node: str) -> int:
    name = TestNode.parse(node).name
    return int(name.rsplit("_", 1)[1])


def canary_group(
    source: str,
    node: TestNode,
    site: int,
    rng: random.Random,
    avoid: Sequence[Value] = (),
    phrases: Container[str] = frozenset(),
) -> CanaryGroup | None:
    """``source`` with ``node``'s function replaced by ``COPIES`` copies, named ``<name>_1`` ... in
    file order, that differ in the values they expect at site ``site`` (``literal_sites``) and, when
    that one has fewer than ``COPIES`` values, at the sites after it, as many as it takes; each
    copy differs from the test at one site at least. None when the sites have too few values, or
    the names are taken. No copy expects a value of ``avoid`` (what the bug computes there).
    ``phrases``: the pairs of words the package writes (``canary_package``), kept in strings."""
    tree = _parse(source)
    fn = None if tree is None else _function(tree, node)
    sites = literal_sites(source, node)
    if fn is None or not 0 <= site < len(sites):
        return None
    names = [f"{node.name}_{i + 1}" for i in range(COPIES)]
    body_name = "_" + node.name
    if _defined_names(source) & set(names) or re.search(rf"\b{re.escape(body_name)}\b", source):
        return None
    lines = source.splitlines(keepends=True)
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1
    last = fn.end_lineno or fn.lineno
    opening = fn.body[0]  # (a nested function or class: from its first decorator; found 2026-12-07)
    starts = min([opening.lineno, *(d.lineno for d in getattr(opening, "decorator_list", []))])
    made = None
    for linked in (True, False):  # (linked: unless no group forms so, or the test cannot be split so)
        drawn = _drawn_sites(source, fn, sites[site:], sites if linked else [], rng, avoid, phrases)
        if drawn is not None:
            used, links, choices, combos = drawn
            made = _body_of(source, node, tuple(used), tuple(map(tuple, links)), first, starts)
            if made is not None:
                break
    if made is None:
        return None
    body, header, call = made
    copies, written = [], []
    for name, combo in zip(names, combos, strict=True):
        texts = tuple(
            str(vals[k]) if chosen.kind == "name" else _literal_text(vals[k])
            for chosen, vals, k in zip(used, choices, combo, strict=True)
        )
        given = ", ".join(f"_v{i}={t}" for i, t in enumerate(texts))
        copies.append(header.replace("\0", name, 1) + call.replace("\0", given, 1))
        written.append(texts)
    gap = "\n" if lines[first][:1].isspace() else "\n\n"
    text = "".join(lines[:first]) + gap.join([body, *copies]) + "".join(lines[last:])
    twin = names[combos.index(tuple(0 for _ in used))]
    return CanaryGroup(
        path=node.path,
        text=text,
        twin=node.renamed(twin),
        canaries=[node.renamed(n) for n in names if n != twin],
        values=tuple(c.value for c in used),
        given=tuple(written),
        outside="".join(lines[:first]) + body + "".join(lines[last:]),
        body=body,
        strings=any(c.kind == "literal" and isinstance(c.value, str) for c in used),
    )


@functools.lru_cache(maxsize=256)
def _body_of(
    source: str, node: TestNode, used: tuple[Site, ...], links: tuple[tuple[Site, ...], ...], first: int, starts: int
) -> tuple[str, str, str] | None:
    """``_shared_body`` of ``node``'s test, kept per set of sites it reads from parameters: every
    draw at a site makes the same body (a deep copy of the test's tree, 6 ms; the audit draws 200)."""
    tree = _parse(source)
    fn = None if tree is None else _function(tree, node)
    if fn is None:
        return None
    header = source.splitlines(keepends=True)[first : starts - 1]
    return _shared_body(fn, node, "_" + node.name, list(used), header, [list(link) for link in links])


def _drawn_sites(
    source: str,
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    candidates: list[Site],
    linkable: list[Site],
    rng: random.Random,
    avoid: Sequence[Value],
    phrases: Container[str],
) -> tuple[list[Site], list[list[Site]], list[list[Value]], list[tuple[int, ...]]] | None:
    """The sites a group changes (of ``candidates``, in order, as many as ``COPIES`` copies take),
    each with the sites of ``linkable`` that expect the same value (changed with it), each one's
    values (``site_values``), and the copies' combinations of them (``_combinations``). None when
    the candidates have too few values."""
    used: list[Site] = []
    links: list[list[Site]] = []
    choices: list[list[Value]] = []
    end = fn.end_lineno or fn.lineno
    for chosen in candidates:
        if any(_same(chosen, u) for u in used if linkable and u.kind == "literal"):
            continue  # (it changes with that one)
        # (not a dotted name's: what the bug reports for one is not recorded (no ``avoid``), and a name
        # changed at every place the test expects it passed on the bug that reports another there)
        same = [o for o in linkable if o != chosen and _same(o, chosen)] if chosen.kind == "literal" else []
        pool = value_pool(source, chosen) if isinstance(chosen.value, str) else []
        changed = [chosen, *same, *used, *(s for link in links for s in link)]  # (each read from a parameter)
        cuts = tuple((c.line, c.start, c.end) for c in changed)
        in_test = test_parts(source, fn.lineno, end, cuts) if isinstance(chosen.value, str) else frozenset()
        values = site_values(chosen, pool, rng, avoid, file_words(source), in_test, phrases)
        if len(values) < 2:
            continue
        used.append(chosen)
        links.append(same)
        choices.append(values)
        combos = _combinations(choices, rng)
        if combos is not None:
            return used, links, choices, combos
    return None


def _same(a: Site, b: Site) -> bool:
    """Two sites that expect the same value, written the same way (``1`` is not ``True`` nor ``1.0``)."""
    return a.kind == b.kind and type(a.value) is type(b.value) and a.value == b.value


def _as_source(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A (changed) test function as source, at its own indentation in its file."""
    indent = " " * fn.col_offset
    return "".join(f"{indent}{line}\n" if line else "\n" for line in ast.unparse(fn).splitlines())


def _replace_sites(tree: ast.AST, by_position: dict[tuple[int, int, int], Callable[[ast.expr], ast.expr]]) -> int:
    """Replace each expression of ``tree`` that sits on one line at a (line, start, end) position of
    ``by_position`` (a site's) by what its function makes of it. How many were replaced."""
    replaced = 0
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            for i, child in enumerate(value if isinstance(value, list) else [value]):
                if not isinstance(child, ast.expr) or child.end_lineno != child.lineno:
                    continue
                make = by_position.get((child.lineno, child.col_offset, child.end_col_offset or -1))
                if make is None:
                    continue
                if isinstance(value, list):
                    value[i] = make(child)
                else:
                    setattr(parent, field, make(child))
                replaced += 1
    return replaced


def _parameter(name: str) -> Callable[[ast.expr], ast.expr]:
    return lambda _: ast.Name(name, ast.Load())


def _captured(site: int) -> Callable[[ast.expr], ast.expr]:
    return lambda value: ast.Call(ast.Name("_dojo_capture", ast.Load()), [ast.Constant(site), value], [])


def _shared_body(
    fn: ast.FunctionDef | ast.AsyncFunctionDef,
    node: TestNode,
    body_name: str,
    used: list[Site],
    header: list[str],
    links: list[list[Site]] | None = None,
) -> tuple[str, str, str] | None:
    """The test as one function that every copy calls, and the text of a copy: (the body: the test
    renamed ``body_name``, undecorated, its sites read from keyword-only parameters ``_v0``...; a
    copy's decorators and ``def`` line with ``\\0`` for its name; its one statement, a call of the
    body with ``\\0`` for the values). Each copy is two lines, so pytest rewrites the test's
    assertions once, not once a copy (rewriting them was most of a canaried run: 0.44 of 0.88 s
    for one toolz test). ``links``: each used site's other sites, read from its parameter too. None
    when the test cannot be split so (a body on its ``def`` line, a method that takes no ``self``)."""
    if fn.body[0].lineno == fn.lineno or not header:
        return None
    args = fn.args
    positional = [a.arg for a in [*args.posonlyargs, *args.args]]
    owner = ""
    if node.cls is not None:
        if not positional or positional[0] not in ("self", "cls"):
            return None
        owner, positional = positional[0] + ".", positional[1:]
    passed = [*positional, *([f"*{args.vararg.arg}"] if args.vararg else [])]
    passed += [f"{a.arg}={a.arg}" for a in args.kwonlyargs]
    passed += [f"**{args.kwarg.arg}"] if args.kwarg else []
    tree = copy.deepcopy(fn)
    tree.name = body_name
    tree.decorator_list = []
    linked = links or [[] for _ in used]
    positions = {(s.line, s.start, s.end): _parameter(f"_v{k}") for k, u in enumerate(used) for s in [u, *linked[k]]}
    if len(positions) != len(used) + sum(map(len, linked)) or _replace_sites(tree, positions) != len(positions):
        return None
    tree.args.kwonlyargs += [ast.arg(f"_v{k}") for k in range(len(used))]
    tree.args.kw_defaults += [None] * len(used)
    body = _as_source(tree)
    head = "".join(header)
    match = re.search(rf"((?:async\s+)?def\s+){re.escape(node.name)}\b", head)
    if match is None:
        return None  # a def split oddly over lines: leave the test alone
    header_text = head[: match.start()] + match.group(1) + "\0" + head[match.end() :]
    inner = " " * fn.body[0].col_offset
    waits = "await " if isinstance(fn, ast.AsyncFunctionDef) else ""
    call = f"{inner}{waits}{owner}{body_name}({', '.join([*passed, chr(0)])})\n"
    return body, header_text, call


CAPTURE_MODULE = "dojo_capture"  # dojo.tasks.canary_capture, as the tree's module of this name
CAPTURE_SITES = 3  # a site and the ones after it that a group may change with it


def capture_text(source: str, node: TestNode, site: int) -> str | None:
    """``source`` with the expected values at ``site`` and the sites after it (``CAPTURE_SITES`` in
    all) wrapped in ``capture(index, value)`` (``dojo.tasks.canary_capture``), and the whole expected
    value that holds ``site`` in ``capture(CAPTURE_WHOLE + site, ...)``: run on the tree as given,
    it tells what the bug computes there. The whole is what a forger compares with the copies'
    values: a list the bug makes of another length fails before any item is compared, so the items'
    captures alone recorded nothing for 75 of the 86 string sites of the swe sets (2026-12-07), and
    a string's canaries need the bug's string to center on (``canary_strings``). None when the test
    has no such site."""
    sites = literal_sites(source, node)[site : site + CAPTURE_SITES]
    if not sites:
        return None
    literal = [(i, s) for i, s in enumerate(sites, start=site) if s.kind == "literal"]  # (a name: its type is read)
    if not literal:
        return None
    inserts: list[tuple[int, int, int, str]] = []  # (line, byte offset, 1 if inside at one place, text)
    whole = _expectation_of(source, node, sites[0])
    if whole is not None:
        (line, start), (end_line, end) = whole
        inserts += [
            (line, start, 0, f"_dojo_capture({CAPTURE_WHOLE + site}, ("),
            (end_line, end, 0, "))"),
        ]  # (a bare tuple)
    for offset, s in literal:
        inserts += [(s.line, s.start, 1, f"_dojo_capture({offset}, "), (s.line, s.end, 1, ")")]
    lines = [line.encode() for line in source.splitlines(keepends=True)]
    for line, at, _, text in sorted(inserts, reverse=True):  # (from the end: each offset still holds)
        lines[line - 1] = lines[line - 1][:at] + text.encode() + lines[line - 1][at:]
    out = b"".join(lines).decode()
    return out + ("" if out.endswith("\n") else "\n") + f"from {CAPTURE_MODULE} import capture as _dojo_capture\n"


CAPTURE_WHOLE = 1000  # the capture index of the whole expected value that holds site i: CAPTURE_WHOLE + i
PLAIN_EQUALS = frozenset({"assertEqual", "assertEquals"})  # helpers that compare with ``==`` alone


def _expectation_of(source: str, node: TestNode, site: Site) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """Where the written-out expected value that holds ``site`` starts and ends ((line, byte
    offset) each), when it is more than the site itself; None otherwise."""
    tree = _parse(source)
    fn = None if tree is None else _function(tree, node)
    if fn is None:
        return None
    site_span = ((site.line, site.start), (site.line, site.end))
    for side in _expected(fn, plain=True):  # (a helper that checks the type of what it is given,
        if side.end_lineno is None or side.end_col_offset is None:  # ``assertListEqual``, networkx's
            continue  # ``edges_equal``, fails on the recorder)
        span = ((side.lineno, side.col_offset), (side.end_lineno, side.end_col_offset))
        if span[0] <= site_span[0] and site_span[1] <= span[1] and span != site_span:
            return span
    return None


def _literal_text(value: Value) -> str:
    """The value as source: a negative number in parentheses (``x == -3`` stays one comparison)."""
    text = repr(value)
    return f"({text})" if isinstance(value, (int, float)) and value < 0 else text
