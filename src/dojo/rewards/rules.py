"""The rule engine: a document task's rules (``dojo.tasks.rules``) checked on a parsed document.

``check_rules(rules, document)`` gives one ``RuleVerdict`` per rule (passed, and why not);
``rules_score(verdicts)`` the weights passed and the weights in all, 0 passed when an essential rule
failed. Everything here runs on the host on data: the candidate's document is parsed
(``dojo.rewards.document_parse``), never executed, and the patterns are the task's.

Matching, so that a document is judged on what it says rather than its typography: headings and
labels compare without case, spacing, emphasis, a trailing ``:`` or (headings) leading numbering
(``3.``, ``Section 3:``); phrases match whole words without case; numbers read ``$1,234.50``,
``1234.5``, ``(12.00)`` (negative), ``15%``.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from dojo.rewards.document_parse import ParsedDocument, Section, Table, plain
from dojo.tasks.rules import (
    ContainsRule,
    CrossReferenceRule,
    FieldRule,
    ForbiddenRule,
    IfbenchRule,
    LengthRule,
    RowProductRule,
    Rule,
    SectionsRule,
    SumRule,
)

_NUMBERING = re.compile(r"^(?:(?:section|clause|part|article)\s+)?\d+(?:\.\d+)*[.):]?\s+", re.IGNORECASE)
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(
    r"^\(?([-−]?)(?:[A-Z]{3}\s?)?[$€£¥]?\s?([-−]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?\s?(?:[A-Z]{3})?\)?(%?)$"
)
FORMATS: dict[str, re.Pattern[str]] = {
    "currency": re.compile(r"^(?:[A-Z]{3}\s?)?[-−]?[$€£¥]?\s?[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)\.\d{2}(?:\s?[A-Z]{3})?$"),
    "email": re.compile(r"^[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}$"),
    "integer": re.compile(r"^[-−]?\d+$"),
    "number": re.compile(r"^[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?$"),
    "percent": re.compile(r"^[-−]?\d+(?:\.\d+)?\s?%$"),
    "phone": re.compile(r"^\+?[\d][\d ().-]{6,20}\d$"),
}
_REFERENCE = re.compile(r"\b(section|figure|table|clause)s?\s+(\d+(?:\.\d+)*)", re.IGNORECASE)
_CAPTION = re.compile(r"^(figure|table)\s+(\d+)\s*[:.]", re.IGNORECASE)
_LEADING_NUMBER = re.compile(r"^(?:(section|clause)\s+)?(\d+(?:\.\d+)*)(?:[.):]|\s)", re.IGNORECASE)


@dataclass(frozen=True)
class RuleVerdict:
    """One rule's verdict on one document."""

    index: int
    kind: str
    label: str
    passed: bool
    detail: str
    weight: int
    essential: bool
    fact: bool = False  # the rule states one of the task's facts (``states_fact``)

    @property
    def component(self) -> str:
        """Its name among the reward's components."""
        return f"rule:{self.index}:{self.label}"


def normal(text: str) -> str:
    """A label or phrase as compared: no emphasis, case or repeated spaces; no trailing ':'."""
    return " ".join(plain(text).lower().split()).rstrip(":").strip()


def heading_key(title: str) -> str:
    """A heading as compared: also without leading numbering (``3.``, ``Section 3:``)."""
    return normal(_NUMBERING.sub("", plain(title)))


def parse_number(text: str) -> float | None:
    """``$1,234.50``, ``1234.5``, ``(12.00)``, ``-3``, ``15%`` as a number; None otherwise (a number
    too large for a float too)."""
    m = _NUMBER.match(text.strip())
    if not m:
        return None
    value = float(m.group(3).replace(",", "") + (m.group(4) or ""))
    if not math.isfinite(value):  # (400 digits: no amount a document states)
        return None
    negative = bool(m.group(1) or m.group(2)) or (text.strip().startswith("(") and text.strip().endswith(")"))
    return -value if negative else value


def words(text: str) -> int:
    return len(_WORD.findall(text))


def has_phrase(text: str, phrase: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", text, re.IGNORECASE) is not None


def section_span(doc: ParsedDocument, title: str | None) -> list[Section] | None:
    """The section titled ``title`` with its subsections (all of them when ``title`` is None);
    None when there is no such section."""
    if title is None:
        return doc.sections
    key = heading_key(title)
    for i, s in enumerate(doc.sections):
        if s.title and heading_key(s.title) == key:
            end = next((j for j in range(i + 1, len(doc.sections)) if doc.sections[j].level <= s.level), None)
            return doc.sections[i : end or len(doc.sections)]
    return None


def _span_text(span: list[Section], doc: ParsedDocument, whole: bool) -> str:
    """The whole document's text, or a section's content with its subsections (titles included)."""
    if whole:
        return doc.text
    return "\n".join([span[0].content(), *(f"{s.title}\n{s.content()}" for s in span[1:])])


def find_field(doc: ParsedDocument, label: str, section: str | None = None) -> tuple[str | None, str]:
    """(value, why not) of the first field labelled ``label``."""
    span = section_span(doc, section)
    if span is None:
        return None, f"there is no section {section!r}"
    key = normal(label)
    for s in span:
        for k, v in s.fields:
            if normal(k) == key:
                return v, ""
    return None, f"no field {label!r}" + (f" in section {section!r}" if section else "")


def _column(table: Table, name: str) -> int | None:
    key = normal(name)
    return next((i for i, c in enumerate(table.columns) if normal(c) == key), None)


def find_table(doc: ParsedDocument, columns: list[str], section: str | None) -> tuple[Table | None, str]:
    span = section_span(doc, section)
    if span is None:
        return None, f"there is no section {section!r}"
    for s in span:
        for t in s.tables:
            if all(_column(t, c) is not None for c in columns):
                return t, ""
    where = f" in section {section!r}" if section else ""
    return None, f"no table with column(s) {', '.join(repr(c) for c in columns)}{where}"


def _numbers_of(table: Table, column: str) -> tuple[list[float], str]:
    i = _column(table, column)
    assert i is not None
    values = []
    for r, row in enumerate(table.rows):
        if not any(c.strip() for c in row):
            continue
        cell = row[i] if i < len(row) else ""
        value = parse_number(cell)
        if value is None:
            return [], f"row {r + 1}: {column} {cell[:40]!r} is not a number"
        values.append(value)
    return values, ""


def check_sections(rule: SectionsRule, doc: ParsedDocument) -> tuple[bool, str]:
    found: list[int] = []
    for title in rule.titles:
        key = heading_key(title)
        at = [i for i, s in enumerate(doc.sections) if s.title and heading_key(s.title) == key]
        if not at:
            return False, f"no section {title!r}"
        span = section_span(doc, title) or []
        if words("\n".join(s.content() for s in span)) < rule.min_words:
            return False, f"section {title!r} has fewer than {rule.min_words} word(s) of content"
        found.append(at[0])
    if rule.ordered and found != sorted(found):
        return False, "the sections are not in the order asked for: " + ", ".join(rule.titles)
    return True, ""


def check_field(rule: FieldRule, doc: ParsedDocument) -> tuple[bool, str]:
    value, why = find_field(doc, rule.label, rule.section)
    if value is None:
        return False, why
    shown = f"{rule.label} {value[:60]!r}"
    if rule.format == "regex":
        assert rule.pattern is not None
        if re.fullmatch(rule.pattern, value) is None:
            return False, f"{shown} does not have the format asked for"
    elif rule.format == "date":
        try:
            datetime.datetime.strptime(value, rule.date_format)
        except ValueError:
            return False, f"{shown} is not a date as {rule.date_format}"
    elif rule.format != "text" and not FORMATS[rule.format].match(value):
        return False, f"{shown} is not {'an' if rule.format[0] in 'aeiou' else 'a'} {rule.format}"
    if rule.equals is not None:
        if rule.format in ("currency", "integer", "number", "percent"):
            got, want = parse_number(value), parse_number(rule.equals)
            ok = got is not None and want is not None and abs(got - want) <= rule.tolerance
        else:
            ok = normal(value) == normal(rule.equals)
        if not ok:
            return False, f"{shown} is not the right value"
    return True, ""


def _field_number(doc: ParsedDocument, label: str) -> tuple[float | None, str]:
    value, why = find_field(doc, label)
    if value is None:
        return None, why
    number = parse_number(value)
    return number, "" if number is not None else f"{label} {value[:40]!r} is not a number"


def check_sum(rule: SumRule, doc: ParsedDocument) -> tuple[bool, str]:
    addends: list[float] = []
    if rule.column is not None:
        table, why = find_table(doc, [rule.column], rule.section)
        if table is None:
            return False, why
        values, why = _numbers_of(table, rule.column)
        if why:
            return False, why
        if len(values) < rule.min_items:
            return False, f"the {rule.column} column has {len(values)} item(s), fewer than {rule.min_items}"
        addends += values
    for label, sign in [(f, 1.0) for f in rule.fields] + [(f, -1.0) for f in rule.subtract]:
        number, why = _field_number(doc, label)
        if number is None:
            return False, why
        addends.append(sign * number)
    total, why = _field_number(doc, rule.total)
    if total is None:
        return False, why
    try:
        added = math.fsum(addends)
    except OverflowError:  # (finite items whose sum is not)
        return False, "the items do not add up to a finite number"
    if not math.isclose(added, total, abs_tol=rule.tolerance):
        return False, f"the items add up to {added:.2f}, but {rule.total} is {total:.2f}"
    return True, ""


def check_row_product(rule: RowProductRule, doc: ParsedDocument) -> tuple[bool, str]:
    table, why = find_table(doc, [*rule.factors, rule.result], rule.section)
    if table is None:
        return False, why
    columns = [_numbers_of(table, c) for c in (*rule.factors, rule.result)]
    if bad := next((why for _, why in columns if why), None):
        return False, bad
    *factors, results = (values for values, _ in columns)
    if not results:
        return False, "the table has no rows"
    for r, result in enumerate(results):
        product = math.prod(f[r] for f in factors)
        if not math.isclose(product, result, abs_tol=rule.tolerance):
            return False, f"row {r + 1}: {' x '.join(rule.factors)} is {product:.2f}, but {rule.result} is {result:.2f}"
    return True, ""


def reference_targets(doc: ParsedDocument) -> dict[str, set[str]]:
    """What exists to be referred to: section, clause, figure and table numbers."""
    found: dict[str, set[str]] = {"section": set(), "clause": set(), "figure": set(), "table": set()}
    for s in doc.sections:
        if s.title and (m := _LEADING_NUMBER.match(plain(s.title) + " ")):
            found["section"].add(m.group(2))
            found["clause"].add(m.group(2))
        for text in s.paragraphs + s.bullets + [f"{k}: {v}" for k, v in s.fields]:
            if m := _CAPTION.match(text):
                found[m.group(1).lower()].add(m.group(2))
            elif (m := _LEADING_NUMBER.match(text + " ")) and "." in m.group(2):
                found["clause"].add(m.group(2))
    return found


def references(doc: ParsedDocument) -> list[tuple[str, str]]:
    """(kind, number) of each reference in the content (captions and headings are not references)."""
    out = []
    for s in doc.sections:
        texts = s.paragraphs + s.bullets + [v for _, v in s.fields] + [c for t in s.tables for r in t.rows for c in r]
        for text in texts:
            body = text[m.end() :] if (m := _CAPTION.match(text)) else text
            out += [(kind.lower(), number) for kind, number in _REFERENCE.findall(body)]
    return out


def check_cross_reference(rule: CrossReferenceRule, doc: ParsedDocument) -> tuple[bool, str]:
    targets = reference_targets(doc)[rule.target]
    made = [number for kind, number in references(doc) if kind == rule.target]
    name = rule.target.capitalize()
    if dangling := sorted({n for n in made if n not in targets}):
        return False, f"{name} {dangling[0]} is referred to, but the document has no such {rule.target}"
    if missing := [n for n in rule.required if n not in made]:
        return False, f"the document never refers to {name} {missing[0]}"
    if len(made) < rule.min_count:
        return False, f"{len(made)} reference(s) to a {rule.target}, fewer than {rule.min_count}"
    return True, ""


def check_forbidden(rule: ForbiddenRule, doc: ParsedDocument) -> tuple[bool, str]:
    if phrase := next((p for p in rule.phrases if has_phrase(doc.text, p)), None):
        return False, f"the document says {phrase!r}"
    if pattern := next((p for p in rule.patterns if re.search(p, doc.text)), None):
        return False, f"the document matches a forbidden pattern ({pattern})"
    return True, ""


def check_contains(rule: ContainsRule, doc: ParsedDocument) -> tuple[bool, str]:
    span = section_span(doc, rule.section)
    if span is None:
        return False, f"there is no section {rule.section!r}"
    text = _span_text(span, doc, rule.section is None)
    if missing := next((p for p in rule.phrases if not has_phrase(text, p)), None):
        return False, f"{missing!r} does not occur" + (f" in section {rule.section!r}" if rule.section else "")
    return True, ""


def measure(doc: ParsedDocument, unit: str, section: str | None) -> int | None:
    span = section_span(doc, section)
    if span is None:
        return None
    if unit in ("words", "characters"):
        text = _span_text(span, doc, section is None)
        return words(text) if unit == "words" else len(text)
    if unit == "sections":
        return sum(bool(s.title) for s in (span if section is None else span[1:]))
    if unit == "bullets":
        return sum(len(s.bullets) for s in span)
    if unit == "paragraphs":
        return sum(len(s.paragraphs) for s in span) if doc.sections else len(re.split(r"\n\s*\n", doc.text.strip()))
    return sum(len(t.rows) for s in span for t in s.tables)


def check_length(rule: LengthRule, doc: ParsedDocument) -> tuple[bool, str]:
    count = measure(doc, rule.unit, rule.section)
    where = f" in section {rule.section!r}" if rule.section else ""
    if count is None:
        return False, f"there is no section {rule.section!r}"
    if rule.min is not None and count < rule.min:
        return False, f"{count} {rule.unit}{where}, fewer than {rule.min}"
    if rule.max is not None and count > rule.max:
        return False, f"{count} {rule.unit}{where}, more than {rule.max}"
    return True, ""


def check_ifbench(rule: IfbenchRule, doc: ParsedDocument) -> tuple[bool, str]:
    from dojo.rewards.ifbench import follows

    ok, why = follows(rule.instruction, rule.kwargs, rule.prompt, doc.text)
    return ok, why


CHECKS: dict[str, Callable[..., tuple[bool, str]]] = {
    "sections": check_sections,
    "field": check_field,
    "sum": check_sum,
    "row_product": check_row_product,
    "cross_reference": check_cross_reference,
    "forbidden": check_forbidden,
    "contains": check_contains,
    "length": check_length,
    "ifbench": check_ifbench,
}


def rule_label(rule: Rule) -> str:
    """A short name for a rule, for its component and its feedback."""
    if isinstance(rule, FieldRule):
        return f"field:{rule.label}"
    if isinstance(rule, SumRule):
        return f"sum:{rule.total}"
    if isinstance(rule, RowProductRule):
        return f"row_product:{rule.result}"
    if isinstance(rule, CrossReferenceRule):
        return f"cross_reference:{rule.target}"
    if isinstance(rule, LengthRule):
        return f"length:{rule.unit}" + (f"[{rule.section}]" if rule.section else "")
    if isinstance(rule, ContainsRule) and rule.section:
        return f"contains[{rule.section}]"
    if isinstance(rule, IfbenchRule):
        return f"ifbench:{rule.instruction}"
    return rule.kind


def check_rules(rules: list[Rule], doc: ParsedDocument) -> list[RuleVerdict]:
    """One verdict per rule, in order."""
    out = []
    for i, rule in enumerate(rules):
        passed, detail = CHECKS[rule.kind](rule, doc)
        verdict = RuleVerdict(i, rule.kind, rule_label(rule), passed, detail, rule.weight, rule.essential,
                              states_fact(rule))  # fmt: skip
        out.append(verdict)
    return out


FORM_KINDS = frozenset({"sections", "forbidden", "length"})  # rules about a document's shape, not what it says


def states_fact(rule: Rule) -> bool:
    """Whether a rule holds only for a document that says one of the task's facts: a field of a
    given value, phrases it must contain. A rule of consistency (sums, row products, references,
    a field's format) holds for made-up content too, a form rule for none."""
    return isinstance(rule, ContainsRule) or (isinstance(rule, FieldRule) and rule.equals is not None)


def rules_score(verdicts: list[RuleVerdict]) -> tuple[int, int]:
    """(weights passed, weights in all); nothing passed when an essential rule failed, or when none
    of the rules that state the task's facts passed (where there are any; else none of those about
    content: any kind but ``FORM_KINDS``). Form alone earns nothing (the required headings with a
    filler sentence each passed half of an invoice's rules), nor does made-up content: the headings
    with every number 0 passed the sums and row products (0 + 0 = 0) and, with them, every form rule."""
    total = sum(v.weight for v in verdicts)
    if any(v.essential and not v.passed for v in verdicts):
        return 0, total
    gate = [v for v in verdicts if v.fact] or [v for v in verdicts if v.kind not in FORM_KINDS]
    if gate and not any(v.passed for v in gate):
        return 0, total
    return sum(v.weight for v in verdicts if v.passed), total
