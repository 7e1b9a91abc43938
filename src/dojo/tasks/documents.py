"""``family:documents`` (Markdown, JSON) and ``family:office`` (DOCX, XLSX): write a standard
document (an invoice, a quarterly report, a policy) from a brief; a rule engine checks it.

The generator draws the facts (seeded), writes the brief (the facts and the requirements in words),
the rules that check them (``dojo.tasks.rules``: the task's tests) and a reference document that
passes every rule. Levels add rules and fields:

| level | difficulty | rules |
|---|---|---|
| 1 | 0 - 0.25 | the sections (essential: each with content), identifying fields, the total, no placeholders |
| 2 | 0.25 - 0.5 | + dates, e-mail and version formats, sections in order, length bounds |
| 3 | 0.5 - 0.75 | + numeric consistency (items add up to the totals, qty x price), required content |
| 4 | 0.75 - 1 | + cross-references (numbered sections, figures, clauses), more fields and limits |

What the model must compute (an invoice's totals, a report's quarter totals) is never in the brief;
the rules that expect it stay with the grader, outside the sandbox. ``documents`` answers in the
reply (Markdown, or JSON in dojo's document layout); ``office`` answers with a Python script that
writes the file in the sandbox's ``documents`` environment (python-docx, openpyxl preloaded).
"""

from __future__ import annotations

import datetime
import functools
import random

from dojo.tasks.document_render import Block, Draft, render
from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.model import Task, TaskMetadata, TestCase
from dojo.tasks.programs import program_source
from dojo.tasks.rules import (
    ContainsRule,
    CrossReferenceRule,
    DocumentSpec,
    FieldRule,
    ForbiddenRule,
    LengthRule,
    RowProductRule,
    Rule,
    SectionsRule,
    SumRule,
    rule_data,
)

ENVIRONMENT = "documents"
# The environment's distributions, as installed here (adopted: no index, no network).
DISTRIBUTIONS = ("python-docx", "lxml", "typing_extensions", "openpyxl", "et_xmlfile")
LEVELS = 4
KINDS = ("invoice", "report", "policy")
PLACEHOLDERS = ForbiddenRule(phrases=["TBD", "TODO", "lorem ipsum", "XXX", "[insert"], patterns=[r"\{\{[^{}]*\}\}"])
COMPANIES = [
    "Acme Corp",
    "Globex Ltd",
    "Initech",
    "Umbrella Health",
    "Stark Industries",
    "Wayne Logistics",
    "Hooli",
    "Vandelay Imports",
    "Soylent Foods",
    "Cyberdyne Systems",
    "Tyrell Labs",
    "Wonka Confectionery",
]
PEOPLE = [
    "Ada Lovelace",
    "Alan Turing",
    "Grace Hopper",
    "Katherine Johnson",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Frances Allen",
    "John Backus",
    "Radia Perlman",
    "Ken Thompson",
    "Margaret Hamilton",
]
ITEMS = [
    "Consulting hours",
    "Server rental",
    "Software licence",
    "Support plan",
    "Training session",
    "Data migration",
    "Security audit",
    "Design review",
    "Cloud storage",
    "Network switch",
    "Laptop",
    "Monitor",
]
TOPICS = {
    "Remote Work": ["work remotely up to {n} days a week", "keep core hours of {n} hours a day"],
    "Expense Reimbursement": ["submit receipts within {n} days", "get approval for expenses above ${n}"],
    "Data Retention": ["keep customer records for {n} months", "delete backups older than {n} days"],
    "Acceptable Use": ["change passwords every {n} days", "lock screens after {n} minutes idle"],
    "Travel": ["book flights at least {n} days ahead", "claim at most ${n} a day for meals"],
}


@functools.cache
def documents_environment() -> str:
    """The ``documents`` environment (python-docx and openpyxl preloaded, then warmed up:
    ``dojo.tasks.programs.documents_warmup``), adopted on first use: its ref."""
    from dojo.sandbox.environment import EnvironmentStore

    warmup = program_source("documents_warmup")
    return EnvironmentStore().adopt(ENVIRONMENT, list(DISTRIBUTIONS), preload=["docx", "openpyxl"], warmup=warmup).ref


def money(cents: int) -> str:
    return f"${cents // 100:,}.{cents % 100:02d}"


def plain_amount(cents: int) -> str:
    return f"{cents // 100}.{cents % 100:02d}"


def _date(rng: random.Random) -> datetime.date:
    return datetime.date(2024, 1, 1) + datetime.timedelta(days=rng.randrange(700))


class _Spec:
    """What one draw produced: the draft, the rules, and the brief's lines."""

    def __init__(self, kind: str, title: str) -> None:
        self.kind, self.title = kind, title
        self.blocks: list[Block] = []
        self.rules: list[Rule] = []
        self.facts: list[str] = []
        self.asks: list[str] = []

    def field(self, label: str, value: str, shown: str | None = None, **rule: object) -> None:
        """A field the document must give; ``shown``: how the brief states its fact (None: not stated)."""
        if shown is not None:
            self.facts.append(f"{label}: {shown}")
        self.rules.append(FieldRule(label=label, **rule))


def _amount(label: str, xlsx: bool, cents: int) -> FieldRule:
    """A field holding an amount: a plain number in a spreadsheet, currency elsewhere."""
    return FieldRule(label=label, format="number" if xlsx else "currency", equals=plain_amount(cents))


def invoice(rng: random.Random, level: int, xlsx: bool) -> _Spec:
    seller, client = rng.sample(COMPANIES, 2)
    number = f"INV-{rng.randint(2024, 2026)}-{rng.randint(1, 9999):04d}"
    issued = _date(rng)
    due = issued + datetime.timedelta(days=rng.choice([14, 30, 45]))
    email = f"billing@{seller.split()[0].lower()}.example"
    items = [
        (name, rng.randint(1, 12), rng.randint(500, 50_000)) for name in rng.sample(ITEMS, rng.randint(2, 2 + level))
    ]
    subtotal = sum(q * p for _, q, p in items)
    rate = rng.choice([5, 8, 10, 15, 20])
    tax = (subtotal * rate + 50) // 100
    total = subtotal + tax
    spec = _Spec("invoice", f"Invoice {number}")
    fmt = plain_amount if xlsx else money
    rows = [[name, str(q), fmt(p), fmt(q * p)] for name, q, p in items]
    details = Block("Invoice Details", fields=[("Invoice Number", number), ("Issue Date", issued.isoformat())])
    bill_to = Block("Bill To", fields=[("Client", client)], paragraphs=[f"Invoice from {seller} to {client}."])
    lines = Block("Line Items", columns=["Description", "Quantity", "Unit Price", "Amount"], rows=rows)
    totals = Block("Totals", fields=[("Subtotal", fmt(subtotal)), ("Tax", fmt(tax)), ("Total", fmt(total))])
    terms = Block("Payment Terms", paragraphs=[f"Payment is due by {due.isoformat()}; questions go to {email}."])
    spec.blocks = [details, bill_to, lines, totals]
    spec.facts += [f"Seller: {seller}", f"Client: {client}", f"Tax rate: {rate}% of the subtotal, rounded to the cent"]
    spec.facts += [f"Item: {name}, quantity {q}, unit price {money(p)}" for name, q, p in items]
    spec.field("Invoice Number", number, number, format="regex", pattern=r"INV-\d{4}-\d{4}", equals=number)
    spec.rules.append(_amount("Total", xlsx, total))
    spec.asks.append("Totals gives Subtotal, Tax and Total (computed from the items)")
    if level >= 1:
        spec.field(
            "Issue Date", issued.isoformat(), issued.strftime("%d %B %Y"), format="date", equals=issued.isoformat()
        )
        details.fields += [("Due Date", due.isoformat()), ("Contact Email", email)]
        spec.field(
            "Due Date",
            due.isoformat(),
            f"{(due - issued).days} days after the issue date",
            format="date",
            equals=due.isoformat(),
        )
        spec.field("Contact Email", email, email, format="email", equals=email)
        spec.asks.append("dates as YYYY-MM-DD")
    if level >= 2:
        spec.blocks.append(terms)
        spec.rules += [
            SumRule(column="Amount", total="Subtotal", min_items=len(items)),
            SumRule(fields=["Subtotal", "Tax"], total="Total"),
            RowProductRule(factors=["Quantity", "Unit Price"], result="Amount"),
            ContainsRule(phrases=[client], section="Bill To"),
        ]
        spec.asks.append(
            "the Line Items table has the columns Description, Quantity, Unit Price, Amount, one row per item"
        )
    if level >= 3:
        spec.rules.append(_amount("Tax", xlsx, tax))
        spec.rules.append(LengthRule(unit="words", max=60, section="Payment Terms"))
        spec.rules.append(ContainsRule(phrases=[email, due.isoformat()], section="Payment Terms"))
        spec.asks.append("Payment Terms states the due date and the contact e-mail in at most 60 words")
    return spec


def report(rng: random.Random, level: int, xlsx: bool) -> _Spec:
    company, author = rng.choice(COMPANIES), rng.choice(PEOPLE)
    rid, date = f"RPT-{rng.randint(1000, 9999)}", _date(rng)
    quarter = rng.randint(1, 4)
    months = [datetime.date(2024, 3 * quarter - 2 + i, 1).strftime("%B") for i in range(3)]
    revenue = [rng.randint(200, 900) * 1000 for _ in months]
    costs = [rng.randint(100, 600) * 1000 for _ in months]
    spec = _Spec("report", f"{company} quarterly report, Q{quarter} 2024")
    numbered = level >= 3
    names = ["Summary", "Metrics", "Findings", "Recommendations"]
    heads = [f"{i + 1}. {n}" if numbered else n for i, n in enumerate(names)]
    best = months[max(range(3), key=lambda i: revenue[i] - costs[i])]
    summary = Block(
        heads[0], paragraphs=[f"{company} closed Q{quarter} with a profit in the quarter; {best} was the best month."]
    )
    rows = [[m, str(r), str(c), str(r - c)] for m, r, c in zip(months, revenue, costs, strict=True)]
    metrics = Block(heads[1], columns=["Month", "Revenue", "Costs", "Profit"], rows=rows)
    metrics.fields = [
        ("Total Revenue", str(sum(revenue))),
        ("Total Costs", str(sum(costs))),
        ("Total Profit", str(sum(revenue) - sum(costs))),
    ]
    findings = Block(
        heads[2], bullets=[f"{m}: revenue {r}, costs {c}." for m, r, c in zip(months, revenue, costs, strict=True)]
    )
    recs = Block(heads[3], paragraphs=[f"Keep the cost discipline of {best} across the next quarter."])
    preamble = Block("Report Details", fields=[("Report ID", rid), ("Date", date.isoformat()), ("Author", author)])
    spec.blocks = [preamble, summary, metrics, findings, recs]
    spec.facts += [f"Company: {company}", f"Author: {author}", f"Quarter: Q{quarter} 2024"]
    spec.facts += [f"{m}: revenue {r}, costs {c}" for m, r, c in zip(months, revenue, costs, strict=True)]
    spec.field("Report ID", rid, rid, format="regex", pattern=r"RPT-\d{4}", equals=rid)
    spec.rules.append(FieldRule(label="Total Profit", format="number", equals=str(sum(revenue) - sum(costs))))
    spec.asks.append(
        "Metrics gives the fields Total Revenue, Total Costs and Total Profit for the quarter, as plain numbers"
    )
    spec.asks.append(
        "the Metrics table has the columns Month, Revenue, Costs, Profit, one row per month, plain numbers"
    )
    if level >= 1:
        spec.field("Date", date.isoformat(), date.strftime("%d %B %Y"), format="date", equals=date.isoformat())
        spec.field("Author", author, author, equals=author)
        spec.rules += [
            LengthRule(unit="words", max=60, section=heads[0]),
            LengthRule(unit="bullets", min=3, section=heads[2]),
        ]
        spec.asks += ["the date as YYYY-MM-DD", "the Summary in at most 60 words", "Findings as at least 3 bullets"]
    if level >= 2:
        spec.rules += [
            SumRule(column="Revenue", total="Total Revenue", min_items=3),
            SumRule(column="Costs", total="Total Costs", min_items=3),
            SumRule(fields=["Total Revenue"], subtract=["Total Costs"], total="Total Profit"),
            ContainsRule(phrases=months, section=heads[2]),
        ]
        spec.asks.append("Findings names each month")
    if numbered:
        metrics.paragraphs.insert(0, "Figure 1: revenue, costs and profit by month.")
        summary.paragraphs.append("Section 3 lists the findings; Figure 1 shows the monthly figures.")
        spec.rules += [
            CrossReferenceRule(target="section", min_count=1, required=["3"]),
            CrossReferenceRule(target="figure", min_count=1, required=["1"]),
        ]
        spec.asks.append(
            "number the headings as written above; in the Summary refer to the findings as Section 3 and "
            "to the Metrics table, captioned 'Figure 1: ...' in Metrics, as Figure 1"
        )
    return spec


def policy(rng: random.Random, level: int, xlsx: bool) -> _Spec:
    company, topic = rng.choice(COMPANIES), rng.choice(sorted(TOPICS))
    number = f"POL-{topic[:3].upper()}-{rng.randint(100, 999)}"
    effective, owner = _date(rng), rng.choice(PEOPLE)
    email, version = f"policy@{company.split()[0].lower()}.example", f"{rng.randint(1, 5)}.{rng.randint(0, 9)}"
    values = [rng.randint(2, 90) for _ in TOPICS[topic]]
    clauses = [t.format(n=v) for t, v in zip(TOPICS[topic], values, strict=True)]
    numbered = level >= 3
    names = ["Purpose", "Scope", "Definitions", "Policy Statement", "Enforcement", "Review"]
    heads = [f"{i + 1}. {n}" for i, n in enumerate(names)]
    spec = _Spec("policy", f"{company} {topic} Policy")
    blocks = [
        Block(heads[0], paragraphs=[f"This policy sets how {company} staff {clauses[0]}."]),
        Block(heads[1], paragraphs=[f"It applies to every employee and contractor of {company}."]),
        Block(
            heads[2], bullets=["Employee: anyone employed by the company.", "Manager: an employee who leads a team."]
        ),
        Block(heads[3], paragraphs=[f"4.{i + 1} Staff must {c}." for i, c in enumerate(clauses)]),
        Block(
            heads[4],
            paragraphs=[
                "Breaches of clause 4.1 are reported to the policy owner."
                if numbered
                else "Breaches are reported to the policy owner."
            ],
        ),
        Block(heads[5], paragraphs=[f"The owner reviews this policy every 12 months; write to {email}."]),
    ]
    details = Block(
        "Policy Details",
        fields=[
            ("Policy Number", number),
            ("Effective Date", effective.isoformat()),
            ("Owner", owner),
            ("Contact", email),
            ("Version", version),
        ],
    )
    spec.blocks = [details, *blocks]
    spec.facts += [f"Company: {company}", f"Topic: {topic}", f"Owner: {owner}", f"Version: {version}"]
    spec.facts += [f"Rule: staff must {c}" for c in clauses]
    spec.field("Policy Number", number, number, format="regex", pattern=r"POL-[A-Z]{3}-\d{3}", equals=number)
    spec.rules.append(ContainsRule(phrases=[str(v) for v in values], section=heads[3]))
    spec.asks.append("Policy Statement gives each rule as a numbered clause (4.1, 4.2, ...) with its number")
    if level >= 1:
        spec.field(
            "Effective Date",
            effective.isoformat(),
            effective.strftime("%d %B %Y"),
            format="date",
            equals=effective.isoformat(),
        )
        spec.field("Contact", email, email, format="email", equals=email)
        spec.field("Version", version, None, format="regex", pattern=r"\d+\.\d+", equals=version)
        spec.rules += [LengthRule(unit="words", max=400), LengthRule(unit="bullets", min=2, section=heads[2])]
        spec.asks += ["the effective date as YYYY-MM-DD", "at most 400 words", "Definitions as at least 2 bullets"]
    if level >= 2:
        spec.rules.append(ContainsRule(phrases=[owner], section="Policy Details"))
        spec.rules.append(ContainsRule(phrases=["12 months"], section=heads[5]))
        spec.asks.append("Review says the policy is reviewed every 12 months")
    if numbered:
        spec.rules.append(CrossReferenceRule(target="clause", min_count=1, required=["4.1"]))
        spec.asks.append("Enforcement refers to the first clause as 'clause 4.1'; every clause referred to must exist")
    return spec


MAKERS = {"invoice": invoice, "report": report, "policy": policy}
FORMAT_HELP = {
    "markdown": "Reply with the document in Markdown in one ```markdown block: '#' headings, each field on its own "
    "line as 'Label: value', bullets with '- ', tables as pipe tables with a header row.",
    "json": 'Reply with the document as JSON in one ```json block: {"title": ..., "sections": [{"heading": ..., '
    '"fields": {label: value}, "paragraphs": [...], "bullets": [...], "table": {"columns": [...], "rows": [[...]]}}]} '
    "(every value a string; leave out what a section does not have).",
    "docx": "Reply with a Python script in one ```python block that writes the document to {path} with python-docx: "
    "headings with add_heading, each field as its own paragraph 'Label: value', bullets with style 'List Bullet', "
    "tables with a header row.",
    "xlsx": "Reply with a Python script in one ```python block that writes the document to {path} with openpyxl: one "
    "sheet per section, named after its heading; each field as a row (label in column A, value in column B); a table "
    "as its header row then its rows, after an empty row; paragraphs and '- ' bullets as one-cell rows; amounts as "
    "plain numbers (values, not formulas).",
}


def _brief(spec: _Spec, fmt: str, path: str | None) -> str:
    titles = [b.heading for b in spec.blocks]
    lines = [
        f"Write the {spec.kind} '{spec.title}'.",
        "",
        "Facts:",
        *(f"- {f}" for f in spec.facts),
        "",
        "Requirements:",
    ]
    lines.append(f"- sections with exactly these headings, in this order, each with content: {'; '.join(titles)}")
    fields = [r.label for r in spec.rules if isinstance(r, FieldRule)]
    lines.append(f"- fields (as 'Label: value'): {', '.join(dict.fromkeys(fields))}")
    lines += [f"- {ask}" for ask in spec.asks]
    lines.append("- no placeholders (TBD, TODO, XXX, lorem ipsum)")
    return "\n".join(lines) + "\n\n" + FORMAT_HELP[fmt].replace("{path}", path or "")


class DocumentFamily:
    """See the module doc: ``formats`` are those the family draws from."""

    def __init__(self, name: str, formats: tuple[str, ...]) -> None:
        self.name, self.formats = name, formats

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, LEVELS)
        kind = rng.choice(KINDS)
        fmt = self.formats[0] if level == 0 and self.name == "documents" else rng.choice(self.formats)
        path = f"{kind}.{fmt}" if fmt in ("docx", "xlsx") else None
        spec = MAKERS[kind](rng, level, fmt == "xlsx")
        titles = [b.heading for b in spec.blocks]
        rules: list[Rule] = [SectionsRule(titles=titles, ordered=level >= 1, min_words=3, essential=True), *spec.rules]
        rules.append(PLACEHOLDERS)
        draft = Draft(spec.title, spec.blocks)
        return Task(
            id=f"{self.name}/{kind}",
            domain="documents",
            form="document",
            language="python" if path else "text",
            prompt=_brief(spec, fmt, path),
            tests=[TestCase(expected=rule_data(r)) for r in rules],
            reference=render(draft, fmt, path),
            document=DocumentSpec(format=fmt, path=path),
            environment=documents_environment() if path else None,
            metadata=TaskMetadata(
                source=f"family:{self.name}", difficulty=round(difficulty, 3), tags=[kind, fmt, f"level{level + 1}"]
            ),
        )


register_family(DocumentFamily("documents", ("markdown", "json")))
register_family(DocumentFamily("office", ("docx", "xlsx")))
