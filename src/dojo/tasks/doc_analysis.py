"""``family:doc_analysis``: long synthetic documents (service contracts, annual financial statements)
with planted entities, figures and discrepancies; the model reads one and answers with a JSON
report, graded field by field against the generator's truth on the host (``answer`` form,
``answer_match="fields"``: ``dojo.rewards.report``). Nothing runs; the truth is only in the tests.

A contract names its parties, an effective date, a term, a governing law and a schedule of
milestone payments; a statement names its company, auditor, year end and the lines of its income
statement and balance sheet. Planted discrepancies, each in a numbered section: a stated total that
is not the sum of its items (``total_mismatch``), a date that contradicts the one stated first
(``date_conflict``), a reference to a section that does not exist (``missing_reference``). The rest
is seeded boilerplate drawn from clause templates, so the document's length sets the level.

Levels (difficulty 0..1 in four steps), in words of text (about 1.3 tokens each): ~1,500 (parties or
company, a date, a text field, one discrepancy); ~4,000 (+ figures: a stated total and the sum of
the items); ~9,000 (+ a computed date or figure); ~20,000 (+ more parties, up to three
discrepancies). Set-valued fields get F1 partial credit; numbers are compared within 0.01; dates
(``YYYY-MM-DD``) and names as text.
"""

from __future__ import annotations

import datetime
import json
import random
from collections.abc import Sequence
from typing import Any

from dojo.tasks.families import difficulty_level, register_family
from dojo.tasks.model import Task, TaskMetadata, TestCase

LEVEL_WORDS = (1500, 4000, 9000, 20000)
DISCREPANCIES = ("total_mismatch", "date_conflict", "missing_reference")
# Fields a reply can guess without reading (a few values each, or a few sections): a report right in
# these alone earns nothing (``dojo.rewards.report``: ``"guessable"`` in the test).
GUESSABLE = frozenset(("governing_law", "auditor", "term_months", "year_end", "discrepancies"))
_ADJ = ("Northern", "Blue", "Granite", "Silver", "Harbor", "Summit", "Cedar", "Atlas", "Meridian", "Crescent",
        "Oak", "Pioneer", "Vertex", "Coastal", "Golden", "Ironwood", "Lumen", "Orchid", "Polar", "Quarry")  # fmt: skip
_NOUN = ("Logistics", "Analytics", "Foods", "Energy", "Systems", "Textiles", "Robotics", "Health", "Capital",
         "Media", "Mining", "Software", "Freight", "Pharma", "Optics", "Farms", "Marine", "Labs")  # fmt: skip
_SUFFIX = ("Ltd", "Inc.", "GmbH", "LLC", "S.A.", "plc", "B.V.", "Pty Ltd")
LAWS = ("England and Wales", "the State of New York", "Delaware", "Ontario", "New South Wales", "Singapore",
        "the Netherlands", "Ireland", "Scotland", "California")  # fmt: skip
AUDITORS = ("Hale & Pryor LLP", "Brightline Audit", "Kessler Moss", "Verity Partners", "Ashcombe & Co")
_TOPICS = ("services", "deliverables", "personnel", "subcontracting", "confidential information", "records",
           "audits", "insurance", "warranties", "liability", "indemnities", "force majeure", "notices",
           "assignment", "data protection", "intellectual property", "acceptance", "change requests")  # fmt: skip
_VERBS = ("shall", "may not", "must", "will", "undertakes to")
_ACTS = ("maintain complete and accurate records of", "promptly notify the other party of any change to",
         "use reasonable endeavours to preserve", "not disclose to any third party the terms of",
         "comply with all applicable laws relating to", "keep under regular review the arrangements for",
         "provide written reports on", "cooperate in good faith regarding")  # fmt: skip
_TIMES = ("within {n} days of a written request", "at least once every {n} months", "no later than {n} business days "
          "after the event", "for a period of {n} years after expiry", "at its own cost and expense")  # fmt: skip
_FIN = ("Management reviewed the {topic} of the group during the year and found no matters requiring adjustment.",
        "The directors consider that the carrying amount of {topic} approximates its fair value.",
        "Estimates relating to {topic} are reviewed on an ongoing basis; revisions are recognised prospectively.",
        "The group's exposure to {topic} is monitored monthly by the finance committee.",
        "No significant events affecting {topic} occurred after the reporting date.")  # fmt: skip
_FIN_TOPICS = ("trade receivables", "inventories", "leases", "provisions", "deferred tax", "goodwill",
               "foreign exchange", "interest rates", "liquidity", "pensions", "intangible assets",
               "borrowings")  # fmt: skip
CONTRACT_TITLES = ("Definitions", "Services", "Term", "Fees and Payment", "Confidentiality", "Warranties",
                   "Liability", "Termination", "Data Protection", "Insurance", "Audit", "Notices", "Assignment",
                   "Force Majeure", "Dispute Resolution", "General")  # fmt: skip


def company(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = f"{rng.choice(_ADJ)} {rng.choice(_NOUN)} {rng.choice(_SUFFIX)}"
        if name not in taken:
            taken.add(name)
            return name


def _date(rng: random.Random) -> datetime.date:
    return datetime.date(2019, 1, 1) + datetime.timedelta(days=rng.randint(0, 6 * 365))


def _add_months(day: datetime.date, months: int) -> datetime.date:
    month = day.month - 1 + months
    return datetime.date(day.year + month // 12, month % 12 + 1, min(day.day, 28))


def _spoken(day: datetime.date) -> str:
    return f"{day.day} {day.strftime('%B')} {day.year}"


def _money(value: float) -> str:
    return f"{value:,.2f}"


def _clause(rng: random.Random, who: list[str]) -> str:
    time = rng.choice(_TIMES).format(n=rng.randint(2, 90))
    return f"{rng.choice(who)} {rng.choice(_VERBS)} {rng.choice(_ACTS)} {rng.choice(_TOPICS)} {time}."


def _filler(rng: random.Random, sentence: Any, words: int) -> list[str]:
    """Paragraphs of seeded boilerplate, about ``words`` words in all."""
    out, count = [], 0
    while count < words:
        para = " ".join(sentence() for _ in range(rng.randint(3, 7)))
        out.append(para)
        count += len(para.split())
    return out


class _Doc:
    def __init__(self, rng: random.Random, level: int) -> None:
        self.rng, self.level = rng, level
        self.sections: list[tuple[str, list[str]]] = []
        self.found: list[dict[str, Any]] = []  # the planted discrepancies

    def plant(self, kind: str, section: int) -> None:
        self.found.append({"kind": kind, "section": section})

    def text(self, title: str) -> str:
        parts = [title, ""]
        for i, (heading, paras) in enumerate(self.sections, start=1):
            parts += [f"{i}. {heading}", *paras, ""]
        return "\n\n".join(parts)


def _ordered(rng: random.Random, titles: Sequence[str]) -> list[str]:
    """The sections in a drawn order, the first first (where the parties or the company are named):
    where the fees (or the balance sheet, the total that may not add up) always were section 4 (3),
    a reply that read nothing, naming a ``total_mismatch`` there, was paid on most hard tasks
    (adversary, 2026-12-07)."""
    return [titles[0], *rng.sample(titles[1:], len(titles) - 1)]


def _plan(rng: random.Random, level: int, n_sections: int) -> dict[str, int]:
    """Which discrepancies to plant, and where (section numbers, from 3 on)."""
    kinds = rng.sample(DISCREPANCIES, 1 if level < 3 else rng.randint(2, 3))
    if level == 0 and "total_mismatch" in kinds:  # (the first level has no figures)
        kinds = [rng.choice(DISCREPANCIES[1:])]
    return {k: rng.randint(3, n_sections) for k in kinds}


def _contract(rng: random.Random, level: int) -> tuple[str, list[tuple[str, str, Any, str]]]:
    taken: set[str] = set()
    parties = [company(rng, taken) for _ in range(2 if level < 3 else rng.randint(3, 4))]
    start, term, law = _date(rng), rng.choice((12, 18, 24, 36, 48, 60)), rng.choice(LAWS)
    milestones = [rng.randint(4, 80) * 250.0 for _ in range(rng.randint(3, 3 + 2 * level))]
    titles = _ordered(rng, CONTRACT_TITLES[: 6 + 3 * level])
    doc = _Doc(rng, level)
    plan = _plan(rng, level, len(titles))
    words = LEVEL_WORDS[level] // len(titles)
    stated = sum(milestones) + (rng.randint(1, 40) * 250.0 if "total_mismatch" in plan else 0.0)
    for i, title in enumerate(titles, start=1):
        paras = _filler(rng, lambda: _clause(rng, ["The Supplier", "The Customer", "Each party"]), words)
        if i == 1:
            names = "; ".join(f"({chr(97 + k)}) {p}" for k, p in enumerate(parties))
            paras.insert(0, f"This Agreement is made between {names} (together, the parties) and takes effect on "
                            f"{_spoken(start)} (the Effective Date).")  # fmt: skip
        if title == "Term":
            paras.insert(0, f"The Agreement runs for {term} months from the Effective Date unless ended earlier.")
        if title == "Fees and Payment" and level >= 1:
            lines = [f"Milestone {k}: {_money(m)} USD" for k, m in enumerate(milestones, start=1)]
            paras.insert(0, "The Customer shall pay the following milestones:\n" + "\n".join(lines) +
                         f"\nThe total contract value is {_money(stated)} USD.")  # fmt: skip
        if plan.get("date_conflict") == i:
            other = start + datetime.timedelta(days=rng.randint(20, 300))
            paras.insert(len(paras) // 2, f"For the avoidance of doubt, this Agreement became effective on "
                                          f"{_spoken(other)}.")  # fmt: skip
        if plan.get("missing_reference") == i:
            paras.insert(len(paras) // 2, f"Any claim under this clause is subject to the limits in Section "
                                          f"{len(titles) + rng.randint(1, 9)}.")  # fmt: skip
        if i == len(titles):
            paras.append(f"This Agreement is governed by the laws of {law}.")
        doc.sections.append((title, paras))
    if "total_mismatch" in plan:  # (it sits where the fees are)
        plan["total_mismatch"] = titles.index("Fees and Payment") + 1
    for kind, where in plan.items():
        doc.plant(kind, where)
    fields: list[tuple[str, str, Any, str]] = [
        ("parties", "the names of all parties, as a list", parties, "set"),
        ("effective_date", "the Effective Date as first stated, YYYY-MM-DD", start.isoformat(), "text"),
        ("governing_law", "the jurisdiction whose laws govern the agreement, as written", law, "text"),
    ]
    if level >= 1:
        fields += [("stated_total", "the total contract value as the document states it (a number)", stated,
                    "number"), ("schedule_total", "the sum of the milestone payments (a number)", sum(milestones),
                    "number")]  # fmt: skip
    if level >= 2:
        end = _add_months(start, term).isoformat()
        fields += [("term_months", "the term in months (a number)", term, "number"),
                   ("largest_milestone", "the largest milestone payment (a number)", max(milestones), "number"),
                   ("end_date", "the Effective Date plus the term in months, YYYY-MM-DD (day capped at 28)", end,
                    "text")]  # fmt: skip
    return doc.text(f"SERVICES AGREEMENT No. {rng.randint(1000, 99999)}"), [*fields, _found(doc)]


def _statement(rng: random.Random, level: int) -> tuple[str, list[tuple[str, str, Any, str]]]:
    name = company(rng, set())
    auditor, year_end = rng.choice(AUDITORS), datetime.date(rng.randint(2019, 2025), rng.choice((3, 6, 12)), 28)
    revenue = rng.randint(2000, 90000) * 1000.0
    cost = round(revenue * rng.uniform(0.35, 0.7), -3)
    opex = round(revenue * rng.uniform(0.1, 0.25), -3)
    tax = round((revenue - cost - opex) * 0.2, -3)
    net = revenue - cost - opex - tax
    assets = [rng.randint(100, 20000) * 1000.0 for _ in range(4)]
    titles = ["Directors' Report", "Income Statement", "Balance Sheet", *(f"Note on {t}" for t in _FIN_TOPICS)]
    titles = _ordered(rng, titles[: 6 + 3 * level])
    doc = _Doc(rng, level)
    plan = _plan(rng, level, len(titles))
    words = LEVEL_WORDS[level] // len(titles)
    stated_assets = sum(assets) + (rng.randint(1, 50) * 1000.0 if "total_mismatch" in plan else 0.0)
    for i, title in enumerate(titles, start=1):
        paras = _filler(rng, lambda: rng.choice(_FIN).format(topic=rng.choice(_FIN_TOPICS)), words)
        if i == 1:
            paras.insert(0, f"These are the annual financial statements of {name} for the year ended "
                            f"{_spoken(year_end)}, audited by {auditor}.")  # fmt: skip
        if title == "Income Statement":
            rows = [("Revenue", revenue), ("Cost of sales", -cost), ("Operating expenses", -opex), ("Tax", -tax),
                    ("Net income", net)]  # fmt: skip
            paras.insert(0, "\n".join(f"{label}: {_money(v)}" for label, v in rows))
        if title == "Balance Sheet":
            lines = [f"{label}: {_money(v)}" for label, v in zip(("Property", "Inventories", "Receivables", "Cash"),
                                                                  assets, strict=True)]  # fmt: skip
            paras.insert(0, "\n".join([*lines, f"Total assets: {_money(stated_assets)}"]))
        if plan.get("date_conflict") == i:
            other = year_end - datetime.timedelta(days=rng.randint(31, 200))
            paras.insert(len(paras) // 2, f"The reporting period of these statements ended on {_spoken(other)}.")
        if plan.get("missing_reference") == i:
            paras.insert(len(paras) // 2, f"Further detail is given in Section {len(titles) + rng.randint(1, 9)}.")
        doc.sections.append((title, paras))
    if "total_mismatch" in plan:  # (it sits where the balance sheet is)
        plan["total_mismatch"] = titles.index("Balance Sheet") + 1
    for kind, where in plan.items():
        doc.plant(kind, where)
    fields: list[tuple[str, str, Any, str]] = [
        ("company", "the reporting company's name", name, "text"),
        ("auditor", "the auditor's name", auditor, "text"),
        ("year_end", "the year end as first stated, YYYY-MM-DD", year_end.isoformat(), "text"),
    ]
    if level >= 1:
        fields += [("stated_total_assets", "total assets as the balance sheet states them (a number)", stated_assets,
                    "number"), ("sum_of_assets", "the sum of the balance sheet's asset lines (a number)", sum(assets),
                    "number")]  # fmt: skip
    if level >= 2:
        fields += [("revenue", "revenue (a number)", revenue, "number"),
                   ("gross_profit", "revenue less cost of sales (a number)", revenue - cost, "number"),
                   ("net_income", "net income (a number)", net, "number")]  # fmt: skip
    return doc.text(f"{name.upper()} ANNUAL REPORT"), [*fields, _found(doc)]


def _found(doc: _Doc) -> tuple[str, str, Any, str]:
    what = ("the discrepancies, a list of objects {\"kind\": one of " + ", ".join(DISCREPANCIES) +
            ", \"section\": the number of the section where it appears}")  # fmt: skip
    return ("discrepancies", what, sorted(doc.found, key=lambda d: (d["section"], d["kind"])), "set")


class DocAnalysisFamily:
    """See the module doc."""

    name = "doc_analysis"

    def generate(self, rng: random.Random, difficulty: float) -> Task:
        level = difficulty_level(difficulty, len(LEVEL_WORDS))
        kind = rng.choice(("contract", "statement"))
        text, fields = (_contract if kind == "contract" else _statement)(rng, level)
        asked = "\n".join(f'- "{name}": {what}' for name, what, _, _ in fields)
        prompt = (
            f"Read the document below and extract a report: one JSON object with these fields:\n{asked}\n"
            "Section numbers are those of the document's numbered headings. Numbers are compared within 0.01, "
            "names and dates as text, lists as sets. Answer with the JSON object in a ```json block.\n\n"
            f"--- DOCUMENT ---\n{text}\n--- END OF DOCUMENT ---"
        )
        tests = []
        for name, _, value, match in fields:
            spec: dict[str, Any] = {"field": name, "value": value, "match": match}
            if match == "number":
                spec.update(rel=0.0, abs=0.01)
            if name in GUESSABLE:
                spec["guessable"] = True
            tests.append(TestCase(expected=spec))
        report = {name: value for name, _, value, _ in fields}
        return Task(
            id="doc_analysis",
            domain="documents",
            form="answer",
            answer_match="fields",
            prompt=prompt,
            tests=tests,
            reference=f"```json\n{json.dumps(report, indent=1)}\n```",
            metadata=TaskMetadata(source="family:doc_analysis", difficulty=round(difficulty, 3),
                                  tags=[f"level{level + 1}", kind, *(d["kind"] for d in report["discrepancies"])]),
        )  # fmt: skip


register_family(DocAnalysisFamily())
