"""Declarative rules over a produced document: what a ``document`` task's tests say.

A rule is data (one test's ``expected``, a JSON object with a ``kind``); the engine that checks
it on a parsed document lives in ``dojo.rewards.rules``. The kinds:

- ``sections``: required section headings, optionally in order, each with some content;
- ``field``: a labelled value (``Invoice Number: INV-0042``) exists and has a format (regex, date,
  currency, email, ...) and, optionally, a known value;
- ``sum``: line items add up to a total (a table's column and/or fields), within a tolerance;
- ``row_product``: in each row of a table, one column is the product of others (qty x price);
- ``cross_reference``: every reference (``Section 3``, ``Figure 2``, ``Clause 4.1``, ``Table 1``)
  names something that exists, there are enough of them, and the required ones are made;
- ``forbidden``: phrases or patterns that must not occur;
- ``contains``: phrases that must occur (in the document or one section);
- ``length``: bounds on words, characters, sections, bullets, paragraphs or table rows;
- ``ifbench``: one of IFBench's instructions, judged by IFBench's own checker on the text.

Every rule has a ``weight`` (partial credit counts weights of rules passed) and may be
``essential``: when an essential rule fails the document scores nothing, whatever else holds (a
skeleton of headings with no content passes ``forbidden`` rules; it must not earn for it). Form
alone earns nothing either: where the rules ask for content, a document that meets none of those
scores 0 (``dojo.rewards.rules.rules_score``).
"""

from __future__ import annotations

import datetime
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

DocumentFormat = Literal["text", "markdown", "json", "docx", "xlsx"]
DOCUMENT_FORMATS: tuple[str, ...] = ("text", "markdown", "json", "docx", "xlsx")
FILE_FORMATS: tuple[str, ...] = ("docx", "xlsx")  # written by a script in the sandbox, fetched back
FieldFormat = Literal["text", "regex", "date", "currency", "email", "integer", "number", "percent", "phone"]
LengthUnit = Literal["words", "characters", "sections", "bullets", "paragraphs", "table_rows"]
ReferenceTarget = Literal["section", "figure", "table", "clause"]


def _pattern(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"pattern {value!r} is not a regular expression: {e}") from None
    return value


class _Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    weight: int = Field(1, ge=1, le=100, description="How much this rule counts towards partial credit.")
    essential: bool = Field(False, description="When it fails the document scores 0, whatever else holds.")


class SectionsRule(_Rule):
    """Required section headings (matched without case, numbering like ``3.`` or a trailing ``:``)."""

    kind: Literal["sections"] = "sections"
    titles: list[str] = Field(min_length=1, description="The headings that must be present.")
    ordered: bool = Field(True, description="They must appear in this order (others may stand between).")
    min_words: int = Field(1, ge=0, description="Words each required section must hold (its own content).")


class FieldRule(_Rule):
    """A labelled value (``Label: value``; a JSON section's ``fields``; a two-column table row)."""

    kind: Literal["field"] = "field"
    label: str = Field(min_length=1, description="The field's label, matched without case or a trailing ':'.")
    section: str | None = Field(None, description="Look only in this section (else anywhere, first found).")
    format: FieldFormat = Field("text", description="The format its value must have.")
    pattern: str | None = Field(None, description="format regex: the value must match it whole.")
    date_format: str = Field("%Y-%m-%d", description="format date: the strptime format.")
    equals: str | None = Field(
        None,
        description="The value it must have: as text (case and spacing ignored), or as a number for numeric formats.",
    )
    tolerance: float = Field(0.005, ge=0.0, description="Numeric formats: absolute tolerance for equals.")

    @field_validator("pattern")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return _pattern(v)

    @model_validator(mode="after")
    def _needs_pattern(self) -> FieldRule:
        if self.format == "regex" and not self.pattern:
            raise ValueError(f"field {self.label!r}: format 'regex' needs a pattern")
        if self.format == "date":
            try:
                datetime.datetime(2024, 1, 2).strftime(self.date_format)
            except ValueError as e:
                raise ValueError(f"field {self.label!r}: bad date_format {self.date_format!r}: {e}") from None
        return self


class SumRule(_Rule):
    """Items add up to a total: a table column's cells and/or fields, within a tolerance."""

    kind: Literal["sum"] = "sum"
    column: str | None = Field(None, description="A table column whose every cell is an addend.")
    section: str | None = Field(None, description="The section whose table holds the column (else the first one).")
    fields: list[str] = Field(default_factory=list, description="Fields whose values are addends.")
    subtract: list[str] = Field(default_factory=list, description="Fields whose values are subtracted.")
    total: str = Field(min_length=1, description="The field holding the total.")
    min_items: int = Field(1, ge=0, description="Rows the column must have.")
    tolerance: float = Field(0.01, ge=0.0, description="Absolute tolerance of the comparison.")

    @model_validator(mode="after")
    def _addends(self) -> SumRule:
        if self.column is None and not self.fields:
            raise ValueError(f"sum rule for {self.total!r} needs a column or fields to add")
        return self


class RowProductRule(_Rule):
    """In every row of a table, ``result`` equals the product of the ``factors`` columns."""

    kind: Literal["row_product"] = "row_product"
    factors: list[str] = Field(min_length=2, description="Columns multiplied together.")
    result: str = Field(min_length=1, description="The column that must hold their product.")
    section: str | None = Field(None, description="The section whose table it is (else the first one with them).")
    tolerance: float = Field(0.01, ge=0.0, description="Absolute tolerance per row.")


class CrossReferenceRule(_Rule):
    """References (``Section 3``, ``Figure 2``, ``Table 1``, ``Clause 4.1``) name what exists.

    A section N exists when a heading starts with ``N.``/``N `` or reads ``Section N``; a clause
    N.M when a heading, bullet or paragraph starts with it; a figure or table N when a paragraph
    starts with its caption ``Figure N:``/``Table N:``. Captions and headings are targets, never
    references."""

    kind: Literal["cross_reference"] = "cross_reference"
    target: ReferenceTarget = Field(description="What the references point at.")
    min_count: int = Field(1, ge=0, description="References of this kind the document must make.")
    required: list[str] = Field(default_factory=list, description="Numbers that must be referred to ('3', '4.1').")


class ForbiddenRule(_Rule):
    """Phrases (whole words, without case) and regular expressions that must not occur."""

    kind: Literal["forbidden"] = "forbidden"
    phrases: list[str] = Field(default_factory=list, description="Phrases that must not occur.")
    patterns: list[str] = Field(default_factory=list, description="Regular expressions that must not match.")

    @field_validator("patterns")
    @classmethod
    def _regexes(cls, v: list[str]) -> list[str]:
        return [p for p in v if _pattern(p) is not None]


class ContainsRule(_Rule):
    """Phrases that must occur (whole words, without case), in the document or one section."""

    kind: Literal["contains"] = "contains"
    phrases: list[str] = Field(min_length=1, description="Phrases that must occur.")
    section: str | None = Field(None, description="Only this section's content counts.")


class LengthRule(_Rule):
    """Bounds on a count over the document or one section."""

    kind: Literal["length"] = "length"
    unit: LengthUnit = Field(description="What is counted.")
    min: int | None = Field(None, ge=0, description="At least this many.")
    max: int | None = Field(None, ge=0, description="At most this many.")
    section: str | None = Field(None, description="Count within this section only.")

    @model_validator(mode="after")
    def _bounds(self) -> LengthRule:
        if self.min is None and self.max is None:
            raise ValueError("a length rule needs min or max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"length rule: min {self.min} is above max {self.max}")
        return self


class IfbenchRule(_Rule):
    """One IFBench instruction, judged by IFBench's own checker on the document's text (strict)."""

    kind: Literal["ifbench"] = "ifbench"
    instruction: str = Field(min_length=1, description="IFBench's instruction id, e.g. 'count:word_count_range'.")
    kwargs: dict[str, Any] = Field(
        default_factory=dict, description="The instruction's arguments, as IFBench gives them."
    )
    prompt: str = Field("", description="The prompt (instructions that repeat or reuse it read it).")


Rule = Annotated[
    SectionsRule
    | FieldRule
    | SumRule
    | RowProductRule
    | CrossReferenceRule
    | ForbiddenRule
    | ContainsRule
    | LengthRule
    | IfbenchRule,
    Field(discriminator="kind"),
]
RULE = TypeAdapter(Rule)
RULE_KINDS: tuple[str, ...] = (
    "sections",
    "field",
    "sum",
    "row_product",
    "cross_reference",
    "forbidden",
    "contains",
    "length",
    "ifbench",
)


def parse_rule(data: Any) -> Rule:
    """A rule from its JSON form; ValueError naming what is wrong."""
    if not isinstance(data, dict) or data.get("kind") not in RULE_KINDS:
        kind = data.get("kind") if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"a rule is an object whose kind is one of {', '.join(RULE_KINDS)}; got {kind!r}")
    return RULE.validate_python(data)


def rule_data(rule: Rule) -> dict[str, Any]:
    """A rule as a test's ``expected``: JSON data without its defaults."""
    data: dict[str, Any] = rule.model_dump(exclude_defaults=True)
    data["kind"] = rule.kind
    return data


class DocumentSpec(BaseModel):
    """What a ``document`` task's answer is: text in the completion, or a file a script writes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: DocumentFormat = Field(description="text and markdown and json: the completion; docx and xlsx: a file.")
    path: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$",
        description="docx/xlsx: the file the script writes in its work dir, fetched back and parsed on the host.",
    )
    max_bytes: int = Field(4 << 20, ge=1024, le=64 << 20, description="A larger document is refused (scores 0).")

    @model_validator(mode="after")
    def _file_has_path(self) -> DocumentSpec:
        if (self.format in FILE_FORMATS) != (self.path is not None):
            raise ValueError("a docx or xlsx document needs the path its script writes (and only those have one)")
        if self.path is not None and not self.path.endswith(f".{self.format}"):
            raise ValueError(f"the path of a {self.format} document must end in .{self.format}, not {self.path!r}")
        return self
