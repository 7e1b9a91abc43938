"""The rule engine on documents in each format: what passes, what fails and why, partial credit."""

from __future__ import annotations

import io

import docx
import openpyxl
import pytest

from dojo.rewards.document_parse import DocumentError, parse_document
from dojo.rewards.rules import check_rules, parse_number, rules_score
from dojo.tasks.rules import parse_rule

INVOICE = """# Invoice

## Details

**Invoice Number:** INV-2024-0042
Issue Date: 2024-03-05
Contact Email: billing@acme.example

## Line Items

| Description | Quantity | Unit Price | Amount |
|---|---|---|---|
| Widget | 2 | $10.00 | $20.00 |
| Gadget | 1 | $1,005.50 | $1,005.50 |

## 2. Totals

- Subtotal: $1,025.50
- Tax: $102.55
- Total: $1,128.05

## Notes

Section 2 has the totals; Figure 1 shows them.

Figure 1: the totals.
"""
RULES = [
    {"kind": "sections", "titles": ["Details", "Line Items", "Totals", "Notes"], "essential": True},
    {"kind": "field", "label": "Invoice Number", "format": "regex", "pattern": r"INV-\d{4}-\d{4}"},
    {"kind": "field", "label": "Issue Date", "format": "date", "equals": "2024-03-05"},
    {"kind": "field", "label": "Contact Email", "format": "email"},
    {"kind": "field", "label": "Total", "format": "currency", "equals": "1128.05"},
    {"kind": "sum", "column": "Amount", "total": "Subtotal", "min_items": 2},
    {"kind": "sum", "fields": ["Subtotal", "Tax"], "total": "Total"},
    {"kind": "row_product", "factors": ["Quantity", "Unit Price"], "result": "Amount"},
    {"kind": "cross_reference", "target": "section", "required": ["2"]},
    {"kind": "cross_reference", "target": "figure", "required": ["1"]},
    {"kind": "forbidden", "phrases": ["TBD", "lorem ipsum"]},
    {"kind": "contains", "phrases": ["Widget"], "section": "Line Items"},
    {"kind": "length", "unit": "bullets", "min": 3, "section": "Totals"},
    {"kind": "length", "unit": "words", "max": 200},
]


def verdicts(text: str, rules: list[dict[str, object]] = RULES, fmt: str = "markdown") -> dict[str, str | None]:
    """Rule label -> None when it passed, else why not."""
    parsed = [parse_rule(r) for r in rules]
    return {v.label: (None if v.passed else v.detail) for v in check_rules(parsed, parse_document(fmt, text))}


def test_a_compliant_markdown_invoice_passes_every_rule() -> None:
    assert all(why is None for why in verdicts(INVOICE).values()), verdicts(INVOICE)


@pytest.mark.parametrize(
    ("change", "label", "why"),
    [
        (("$1,128.05", "$1,128.15"), "sum:Total", "add up to 1128.05, but Total is 1128.15"),
        (("| 2 | $10.00 | $20.00 |", "| 3 | $10.00 | $20.00 |"), "row_product:Amount", "row 1"),
        (("Issue Date: 2024-03-05", "Issue Date: 5 March 2024"), "field:Issue Date", "not a date"),
        (("billing@acme.example", "billing at acme"), "field:Contact Email", "not an email"),
        (("Section 2 has", "Section 7 has"), "cross_reference:section", "Section 7 is referred to"),
        (("Figure 1: the totals.", "The totals."), "cross_reference:figure", "no such figure"),
        (("Widget", "TBD"), "forbidden", "'TBD'"),
        (("- Tax: $102.55\n", ""), "length:bullets[Totals]", "fewer than 3"),
    ],
)
def test_each_kind_of_rule_fails_with_its_reason(change: tuple[str, str], label: str, why: str) -> None:
    found = verdicts(INVOICE.replace(*change))
    assert found[label] is not None and why in found[label], found


def test_sections_must_be_in_order_and_hold_content() -> None:
    swapped = INVOICE.replace("## Details", "## Tmp").replace("## Notes", "## Details").replace("## Tmp", "## Notes")
    assert "order" in (verdicts(swapped)["sections"] or "")
    skeleton = "\n\n".join(f"## {t}" for t in ("Details", "Line Items", "Totals", "Notes"))
    assert "fewer than 1 word" in (verdicts(skeleton)["sections"] or "")


def test_partial_credit_counts_weights_and_an_essential_failure_scores_nothing() -> None:
    rules = [parse_rule(r) for r in RULES[:3]]
    rules[1] = rules[1].model_copy(update={"weight": 3})
    doc = parse_document("markdown", INVOICE.replace("INV-2024-0042", "42"))
    assert rules_score(check_rules(rules, doc)) == (2, 5)
    hollow = parse_document("markdown", "## Details\n\nIssue Date: 2024-03-05\n")
    assert rules_score(check_rules(rules, hollow)) == (0, 5)  # the sections rule is essential


def test_numbers_read_as_written() -> None:
    assert parse_number("$1,234.50") == 1234.5
    assert parse_number("(12.00)") == -12.0
    assert parse_number("15%") == 15.0
    assert parse_number("12 apples") is None and parse_number("1,23") is None
    assert parse_number("9" * 400) is None  # too large for a float: no amount


def test_numbers_no_sum_can_hold_fail_the_rule_and_raise_nothing() -> None:
    rules: list[dict[str, object]] = [{"kind": "sum", "fields": ["A", "B"], "total": "Total"}]
    for a, b in (("1e308", "1e308"), ("9" * 400, "-" + "9" * 400)):
        doc = f'{{"sections": [{{"heading": "Totals", "fields": {{"A": "{a}", "B": "{b}", "Total": "1"}}}}]}}'
        (why,) = verdicts(doc, rules, "json").values()
        assert why is not None and ("finite" in why or "not a number" in why), why


def test_placeholders_are_found_in_linear_time_and_only_whole() -> None:
    """The placeholder pattern was ``{{.*?}}``: quadratic on text of many ``{{`` and no ``}}`` (30,000
    braces held the grader 7.5 s, a docx of 100,000 held it 89 s: the 200,000 here, minutes)."""
    from dojo.rewards.rules import check_forbidden
    from dojo.tasks.documents import PLACEHOLDERS

    assert check_forbidden(PLACEHOLDERS, parse_document("markdown", "## Hi\n\nDear {{ name }},\n"))[0] is False
    assert check_forbidden(PLACEHOLDERS, parse_document("markdown", "## Hi\n\n" + "{" * 200_000 + "\n"))[0] is True


def test_json_nested_past_the_recursion_limit_does_not_parse() -> None:
    with pytest.raises(DocumentError, match="nested too deeply"):
        parse_document("json", "[" * 5000)


def test_json_documents_follow_dojos_layout_and_anything_else_does_not_parse() -> None:
    doc = '{"sections": [{"heading": "Totals", "fields": {"Subtotal": "$3.00", "Tax": "$1.00", "Total": "$4.00"}}]}'
    rules: list[dict[str, object]] = [{"kind": "sum", "fields": ["Subtotal", "Tax"], "total": "Total"}]
    assert verdicts(doc, rules, "json") == {"sum:Total": None}
    for bad, why in [("{", "not valid JSON"), ('{"a": 1}', '"sections"'), ('{"sections": [{"x": 1}]}', "unknown keys")]:
        with pytest.raises(DocumentError, match=why):
            parse_document("json", bad)
    with pytest.raises(DocumentError, match="empty"):
        parse_document("markdown", "  \n")


def _docx_bytes() -> bytes:
    d = docx.Document()
    d.add_heading("Totals", level=1)
    d.add_paragraph("Subtotal: 3.00")
    d.add_paragraph("Total: 4.00")
    d.add_paragraph("Tax: 1.00", style="List Bullet")
    table = d.add_table(rows=2, cols=3)
    for j, text in enumerate(["Item", "Qty", "Amount"]):
        table.cell(0, j).text = text
    for j, text in enumerate(["Pen", "3", "3.00"]):
        table.cell(1, j).text = text
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def _xlsx_bytes() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Totals"
    for row in (["Subtotal", 3.0], ["Tax", 1], ["Total", 4], [], ["Item", "Qty", "Amount"], ["Pen", 3, 3.0]):
        sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


@pytest.mark.parametrize(("fmt", "make"), [("docx", _docx_bytes), ("xlsx", _xlsx_bytes)])
def test_office_files_parse_into_the_same_shape(fmt: str, make: object) -> None:
    assert callable(make)
    doc = parse_document(fmt, make())
    rules = [
        parse_rule({"kind": "sections", "titles": ["Totals"]}),
        parse_rule({"kind": "sum", "fields": ["Subtotal", "Tax"], "total": "Total"}),
        parse_rule({"kind": "sum", "column": "Amount", "total": "Subtotal"}),
    ]
    assert all(v.passed for v in check_rules(rules, doc)), check_rules(rules, doc)
    with pytest.raises(DocumentError, match="zip"):
        parse_document(fmt, b"not a zip file at all")


def test_rules_are_validated_with_clear_errors() -> None:
    with pytest.raises(ValueError, match="kind is one of"):
        parse_rule({"kind": "spelling"})
    with pytest.raises(ValueError, match="needs a pattern"):
        parse_rule({"kind": "field", "label": "X", "format": "regex"})
    with pytest.raises(ValueError, match="not a regular expression"):
        parse_rule({"kind": "forbidden", "patterns": ["("]})
    with pytest.raises(ValueError, match="min 5 is above max 2"):
        parse_rule({"kind": "length", "unit": "words", "min": 5, "max": 2})


def test_a_documents_form_alone_earns_nothing_where_its_rules_ask_for_content() -> None:
    """Headings with a filler sentence each pass the sections and placeholder rules: no credit while
    no rule about what the document says holds; rules that only ask for form still score."""
    form = [
        {"kind": "sections", "titles": ["Details", "Totals"]},
        {"kind": "forbidden", "phrases": ["TBD"]},
    ]
    content = [*form, {"kind": "field", "label": "Invoice Number"}]
    filler = "## Details\n\nThe details are given below.\n\n## Totals\n\nThe totals are given below.\n"
    doc = parse_document("markdown", filler)
    assert rules_score(check_rules([parse_rule(r) for r in content], doc)) == (0, 3)
    assert rules_score(check_rules([parse_rule(r) for r in form], doc)) == (2, 2)
    with_field = parse_document(
        "markdown", filler.replace("given below.\n\n## Totals", "below.\n\nInvoice Number: 7\n\n## Totals")
    )
    assert rules_score(check_rules([parse_rule(r) for r in content], with_field)) == (3, 3)


def test_made_up_content_earns_nothing_where_the_rules_state_the_tasks_facts() -> None:
    """The required headings with every number 0 pass the sums and row products (0 + 0 = 0, 0 x 0 =
    0), which had released every form rule: half of an invoice's rules for a document that says
    none of the task's facts (any consistent made-up numbers did the same). Where rules state facts
    (a field's value, phrases to contain), one of them must hold before anything counts."""
    rules = [
        parse_rule(r)
        for r in [
            {"kind": "sections", "titles": ["Details", "Items"]},
            {"kind": "forbidden", "phrases": ["TBD"]},
            {"kind": "field", "label": "Customer", "equals": "Acme Ltd"},
            {"kind": "sum", "column": "Amount", "total": "Total"},
            {"kind": "row_product", "factors": ["Quantity", "Unit Price"], "result": "Amount"},
        ]
    ]
    table = "| Quantity | Unit Price | Amount |\n|---|---|---|\n| {q} | {p} | {a} |\n| {q} | {p} | {a} |\n"
    made_up = "## Details\n\nSee below.\n\nTotal: {t}\n\n## Items\n\n" + table
    zeros = parse_document("markdown", made_up.format(q=0, p=0, a=0, t=0))
    ones = parse_document("markdown", made_up.format(q=1, p=1, a=1, t=2))
    for doc in (zeros, ones):
        verdicts = check_rules(rules, doc)
        assert [v.passed for v in verdicts] == [True, True, False, True, True]
        assert rules_score(verdicts) == (0, 5)
    told = parse_document("markdown", made_up.format(q=1, p=1, a=1, t=2).replace("See below.", "Customer: Acme Ltd"))
    assert rules_score(check_rules(rules, told)) == (5, 5)
    unstated = [r for r in rules if r.kind != "field"]  # no rule states a fact: consistency is content
    assert rules_score(check_rules(unstated, zeros)) == (4, 4)
