"""A document draft (sections of fields, paragraphs, bullets and a table) written out in each
format the ``documents`` and ``office`` families ask for: Markdown, JSON (dojo's document layout),
or the Python script that writes it as DOCX (python-docx) or XLSX (openpyxl). The families' reference
answers are these renderings of the generator's own draft."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field


@dataclass
class Block:
    heading: str
    fields: list[tuple[str, str]] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class Draft:
    title: str
    blocks: list[Block]


def to_markdown(draft: Draft) -> str:
    out = [f"# {draft.title}", ""]
    for b in draft.blocks:
        out += [f"## {b.heading}", ""]
        out += [f"{k}: {v}" for k, v in b.fields] + ([""] if b.fields else [])
        for p in b.paragraphs:
            out += [p, ""]
        out += [f"- {item}" for item in b.bullets] + ([""] if b.bullets else [])
        if b.columns:
            out += ["| " + " | ".join(b.columns) + " |", "|" + "---|" * len(b.columns)]
            out += ["| " + " | ".join(r) + " |" for r in b.rows] + [""]
    return "\n".join(out).strip() + "\n"


def to_json(draft: Draft) -> str:
    sections = []
    for b in draft.blocks:
        s: dict[str, object] = {"heading": b.heading}
        if b.fields:
            s["fields"] = dict(b.fields)
        if b.paragraphs:
            s["paragraphs"] = b.paragraphs
        if b.bullets:
            s["bullets"] = b.bullets
        if b.columns:
            s["table"] = {"columns": b.columns, "rows": b.rows}
        sections.append(s)
    return json.dumps({"title": draft.title, "sections": sections}, indent=1, ensure_ascii=False)


def to_docx_script(draft: Draft, path: str) -> str:
    lines = ["import docx", "", "doc = docx.Document()", f"doc.add_heading({draft.title!r}, level=0)"]
    for b in draft.blocks:
        lines.append(f"doc.add_heading({b.heading!r}, level=1)")
        lines += [f"doc.add_paragraph({f'{k}: {v}'!r})" for k, v in b.fields]
        lines += [f"doc.add_paragraph({p!r})" for p in b.paragraphs]
        lines += [f"doc.add_paragraph({item!r}, style='List Bullet')" for item in b.bullets]
        if b.columns:
            lines.append(f"rows = {[b.columns, *b.rows]!r}")
            lines.append("table = doc.add_table(rows=len(rows), cols=len(rows[0]))")
            lines.append("for i, row in enumerate(rows):")
            lines.append("    for j, text in enumerate(row):")
            lines.append("        table.cell(i, j).text = text")
    lines.append(f"doc.save({path!r})")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """A cell's value as Python source: a number where the text is an amount or a count (XLSX amounts
    are numbers), else the text (a version such as ``1.0`` stays text)."""
    if re.fullmatch(r"-?\d+(\.\d\d)?", text):
        return repr(float(text)) if "." in text else repr(int(text))
    return repr(text)


def to_xlsx_script(draft: Draft, path: str) -> str:
    lines = ["import openpyxl", "", "book = openpyxl.Workbook()", "book.remove(book.active)"]
    for b in draft.blocks:
        lines.append(f"sheet = book.create_sheet({b.heading[:31]!r})")
        lines += [f"sheet.append([{k!r}, {_cell(v)}])" for k, v in b.fields]
        lines += [f"sheet.append([{p!r}])" for p in b.paragraphs]
        lines += [f"sheet.append([{'- ' + item!r}])" for item in b.bullets]
        if b.columns:
            if b.fields or b.paragraphs or b.bullets:
                lines.append("sheet.append([])")
            lines.append(f"sheet.append({b.columns!r})")
            lines += [f"sheet.append([{', '.join(_cell(c) for c in r)}])" for r in b.rows]
    lines.append(f"book.save({path!r})")
    return "\n".join(lines) + "\n"


def render(draft: Draft, fmt: str, path: str | None) -> str:
    """The reference answer: the document in a fenced block, or the script that writes it."""
    if fmt == "markdown":
        return f"```markdown\n{to_markdown(draft)}```"
    if fmt == "json":
        return f"```json\n{to_json(draft)}\n```"
    assert path is not None
    script = to_docx_script(draft, path) if fmt == "docx" else to_xlsx_script(draft, path)
    return f"```python\n{script}```"
