"""A produced document, parsed on the host into one shape whatever its format.

The shape: ``sections`` in order (a heading's title and level, then its fields, paragraphs,
bullets and tables; content before the first heading is a section with an empty title), and the
whole ``text``. How each format maps onto it:

- **Markdown**: ATX headings (``#`` .. ``######``); ``Label: value`` lines (emphasis stripped:
  ``**Total:** $5.00``) are fields; ``-``/``*``/``+``/``1.`` lines are bullets (a bullet that reads
  ``Label: value`` is a field too); pipe tables (header, ``---`` line, rows); other lines are
  paragraphs (consecutive lines join).
- **JSON**: ``{"title": ..., "fields": {...}, "sections": [{"heading": ..., "level": 1, "fields":
  {label: value}, "paragraphs": [...], "bullets": [...], "tables": [{"columns": [...], "rows":
  [[...]]}]}]}`` (``table`` for one table); anything else does not parse.
- **DOCX** (python-docx): ``Title``/``Heading N`` paragraphs are headings; list-styled paragraphs
  (or ones starting ``- ``/``• ``) are bullets; ``Label: value`` paragraphs are fields; tables in
  body order, their first row the columns; a two-column table's rows are fields too.
- **XLSX** (openpyxl, cached values: a formula without a cached value is empty): each sheet is a
  section named after it; a row of three or more cells starts a table (its columns), which runs to
  the next empty row; a row of two cells outside a table is a field (label, value); a row of one
  cell is a paragraph, or a bullet when it starts ``- ``/``• ``.

A document that does not parse raises ``DocumentError`` (the grader's 0 with its message). Files
are bounded before parsing: their size, and a zip's entries and unpacked size.
"""

from __future__ import annotations

import datetime
import io
import json
import posixpath
import re
import threading
import zipfile
from dataclasses import dataclass, field
from typing import Any

from dojo.tasks.values import untrusted_json

MAX_UNPACKED = 16 << 20  # a docx/xlsx that unpacks to more is refused (a zip bomb)
MAX_ENTRIES = 2000
# What the host's parse may meet, counted in the package's XML before python-docx or openpyxl read
# it (their parse runs on the grader's event loop: ~70 us a docx paragraph, so 1.7 million of them
# in 60 MiB held it 115 s; an xlsx's rows may all claim row 1, so a sheet's own size says nothing).
MAX_BLOCKS = 20_000  # docx paragraphs and table cells
MAX_CELLS = 200_000  # xlsx cells
# XML elements of the parts parsed, whatever their names (python-docx: ~28 us a run of text, 2.7
# million empty ones in 58 KiB held the grader 76 s; openpyxl: ~7 us an empty row)
MAX_TAGS = {"docx": 5 * MAX_BLOCKS, "xlsx": 3 * MAX_CELLS}
_ELEMENTS = {
    "docx": (re.compile(rb"<(?:\w+:)?(?:p|tc)[\s/>]"), MAX_BLOCKS, "paragraphs and table cells"),
    "xlsx": (re.compile(rb"<(?:\w+:)?c[\s/>]"), MAX_CELLS, "cells"),
}
# What one element makes the parse build many of: a docx table cell spanning N grid columns
# (python-docx gives it N times, ``_Row.cells``), an xlsx merged range (openpyxl makes a cell of each).
_GRID_SPAN = re.compile(rb"<(?:\w+:)?gridSpan\s+(?:\w+:)?val\s*=\s*[\"'](\d{1,12})")
_MERGED = re.compile(
    rb"<(?:\w+:)?mergeCell\s+ref\s*=\s*[\"']\$?([A-Za-z]{1,3})\$?(\d{1,7}):\$?([A-Za-z]{1,3})\$?(\d{1,7})"
)


def _column(letters: bytes) -> int:
    n = 0
    for c in letters.upper():
        n = n * 26 + c - 64
    return n


def _elements(kind: str, xml: bytes) -> int:
    """How many paragraphs and table cells (docx) or cells (xlsx) a package part makes its parse
    build, as ``_ELEMENTS`` and the spans and merged ranges in it count."""
    pattern = _ELEMENTS[kind][0]
    count = sum(1 for _ in pattern.finditer(xml))
    if kind == "docx":
        count += sum(max(0, int(m.group(1)) - 1) for m in _GRID_SPAN.finditer(xml))
    else:
        for m in _MERGED.finditer(xml):
            columns = abs(_column(m.group(3)) - _column(m.group(1))) + 1
            count += columns * (abs(int(m.group(4)) - int(m.group(2))) + 1)
    return count


class DocumentError(ValueError):
    """The document does not parse (a candidate's fault: it scores 0)."""


@dataclass
class Table:
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class Section:
    title: str
    level: int = 1
    fields: list[tuple[str, str]] = field(default_factory=list)
    paragraphs: list[str] = field(default_factory=list)
    bullets: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)

    def content(self) -> str:
        """Its own content as text (not its title): fields, paragraphs, bullets, table cells."""
        parts = [f"{k}: {v}" for k, v in self.fields]
        parts += self.paragraphs + self.bullets
        for t in self.tables:
            parts += [" | ".join(t.columns), *(" | ".join(r) for r in t.rows)]
        return "\n".join(parts)


@dataclass
class ParsedDocument:
    format: str
    text: str
    sections: list[Section] = field(default_factory=list)


_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
# ``Label: value``, the label of 1 to 6 words
_FIELD = re.compile(r"^([A-Za-z][A-Za-z0-9/&()'#-]*(?: [A-Za-z0-9/&()'#-]+){0,5})\s*:\s+(\S.*)$")
_TABLE_RULE = re.compile(r"^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_EMPHASIS = re.compile(r"(\*\*|__|\*|`)")


def plain(text: str) -> str:
    """Text without Markdown emphasis markers, trimmed."""
    return _EMPHASIS.sub("", text).strip()


def field_of(line: str) -> tuple[str, str] | None:
    """(label, value) when ``line`` reads ``Label: value``."""
    m = _FIELD.match(plain(line))
    return (m.group(1).strip(), m.group(2).strip()) if m else None


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") else body
    return [plain(c) for c in body.split("|")]


def parse_markdown(text: str) -> ParsedDocument:
    current = Section(title="", level=0)
    sections = [current]
    paragraph: list[str] = []
    lines = text.splitlines()

    def flush() -> None:
        if paragraph:
            current.paragraphs.append(" ".join(paragraph))
            paragraph.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        heading = _HEADING.match(stripped)
        if heading:
            flush()
            current = Section(title=plain(heading.group(2).rstrip().rstrip("#")), level=len(heading.group(1)))
            sections.append(current)
        elif stripped.startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1].strip()):
            flush()
            table = Table(columns=_cells(stripped))
            i += 2
            while i < len(lines) and lines[i].strip().startswith("|"):
                table.rows.append(_cells(lines[i]))
                i += 1
            current.tables.append(table)
            if len(table.columns) == 2:
                current.fields += [(r[0], r[1]) for r in table.rows if len(r) == 2 and r[0]]
            continue
        elif not stripped or stripped.startswith("```"):
            flush()
        elif bullet := _BULLET.match(line):
            flush()
            item = plain(bullet.group(1))
            current.bullets.append(item)
            if (pair := field_of(item)) is not None:
                current.fields.append(pair)
        elif (pair := field_of(stripped)) is not None:
            flush()
            current.fields.append(pair)
        else:
            paragraph.append(plain(stripped))
        i += 1
    flush()
    return ParsedDocument("markdown", text, [s for s in sections if s.title or s.content()])


def _scalar(value: Any, where: str) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float, str)):
        return str(value)
    raise DocumentError(f"{where} must be text or a number, not {type(value).__name__}")


def _texts(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise DocumentError(f"{where} must be a list of texts")
    return [_scalar(v, f"{where}[{i}]") for i, v in enumerate(value)]


def _json_section(data: Any, where: str) -> Section:
    if not isinstance(data, dict):
        raise DocumentError(f"{where} must be an object")
    unknown = set(data) - {"heading", "title", "level", "fields", "paragraphs", "bullets", "table", "tables"}
    if unknown:
        raise DocumentError(f"{where} has unknown keys {sorted(unknown)}")
    heading = data.get("heading", data.get("title", ""))
    level = data.get("level", 1)
    if not isinstance(heading, str) or not isinstance(level, int) or isinstance(level, bool):
        raise DocumentError(f"{where}: heading must be text and level an integer")
    section = Section(title=heading.strip(), level=level)
    fields = data.get("fields", {})
    if not isinstance(fields, dict):
        raise DocumentError(f"{where}.fields must be an object of label: value")
    section.fields = [(str(k), _scalar(v, f"{where}.fields[{k!r}]")) for k, v in fields.items()]
    section.paragraphs = _texts(data.get("paragraphs", []), f"{where}.paragraphs")
    section.bullets = _texts(data.get("bullets", []), f"{where}.bullets")
    tables = data.get("tables", [data["table"]] if "table" in data else [])
    if not isinstance(tables, list):
        raise DocumentError(f"{where}.tables must be a list")
    for k, t in enumerate(tables):
        if not isinstance(t, dict) or not isinstance(t.get("rows", []), list):
            raise DocumentError(f"{where}.tables[{k}] must be an object with columns and rows")
        table = Table(columns=_texts(t.get("columns", []), f"{where}.tables[{k}].columns"))
        table.rows = [_texts(r, f"{where}.tables[{k}].rows[{j}]") for j, r in enumerate(t.get("rows", []))]
        section.tables.append(table)
    return section


def parse_json(text: str) -> ParsedDocument:
    try:
        data = untrusted_json(text)
    except ValueError as e:
        raise DocumentError(f"the document is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("sections"), list):
        raise DocumentError('a JSON document is an object with "sections": a list of section objects')
    preamble = _json_section({"fields": data.get("fields", {}), "heading": "", "level": 0}, "the document")
    sections = [_json_section(s, f"sections[{i}]") for i, s in enumerate(data["sections"])]
    if (title := data.get("title")) is not None:
        preamble.paragraphs.insert(0, _scalar(title, "title"))
    kept = [s for s in (preamble, *sections) if s.title or s.content()]
    return ParsedDocument("json", _all_text(kept), kept)


def _unzipped(data: bytes, kind: str) -> None:
    """``DocumentError`` unless ``data`` is a zip within ``MAX_UNPACKED`` and ``MAX_ENTRIES`` whose
    parts that the parse reads (``_parts_read``) stay within ``_ELEMENTS``' and ``MAX_TAGS``' counts."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            entries = z.infolist()
            if len(entries) > MAX_ENTRIES or sum(e.file_size for e in entries) > MAX_UNPACKED:
                raise DocumentError(
                    f"the {kind} file unpacks to more than {MAX_UNPACKED >> 20} MiB or {MAX_ENTRIES} entries"
                )
            names = {e.filename for e in entries}
            read = _parts_read(z, kind, names)
            _, most, what = _ELEMENTS[kind]
            found = tags = 0
            for name in sorted(names) if read is None else read:  # (unknown: every part, whatever its name)
                xml = z.read(name)
                found += _elements(kind, xml)
                tags += xml.count(b"<") - xml.count(b"</")  # (start and empty tags, and the rest of the markup)
                if found > most:
                    raise DocumentError(f"the {kind} file holds more than {most} {what}")
                if tags > MAX_TAGS[kind]:
                    raise DocumentError(f"the {kind} file holds more than {MAX_TAGS[kind]} XML elements")
    except DocumentError:
        raise
    except Exception as e:  # a damaged package: zipfile and zlib raise many kinds (bad data, encryption, a method)
        raise DocumentError(f"the {kind} file is not a valid {kind} (zip) file: {type(e).__name__}: {e}") from None


_RELATIONSHIP = re.compile(rb"<(?:\w+:)?Relationship\b[^>]*>")
_TYPE = re.compile(rb"\bType\s*=\s*[\"']([^\"']*)[\"']")
_TARGET = re.compile(rb"\bTarget\s*=\s*[\"']([^\"']*)[\"']")


def _related(z: zipfile.ZipFile, names: set[str], source: str, kinds: tuple[str, ...]) -> list[str] | None:
    """The parts that ``source`` (``""``: the package) relates to by one of ``kinds`` (the last part of a
    relationship's type), as zip entry names; None where its relationships cannot be read."""
    folder, base = posixpath.split(source)
    rels = posixpath.join(folder, "_rels", base + ".rels")
    if rels not in names:
        return None
    found = []
    for tag in _RELATIONSHIP.findall(z.read(rels)):
        kind, target = _TYPE.search(tag), _TARGET.search(tag)
        if kind is None or target is None:
            return None
        if kind.group(1).decode(errors="replace").rsplit("/", 1)[-1] in kinds:
            path = target.group(1).decode(errors="replace")
            found.append(posixpath.normpath(path.lstrip("/") if path.startswith("/") else posixpath.join(folder, path)))
    return found


def _parts_read(z: zipfile.ZipFile, kind: str, names: set[str]) -> list[str] | None:
    """The parts whose size is the parse's cost, found as python-docx and openpyxl find them: a docx's
    main part; an xlsx's workbook, its sheets and shared strings. None where the relationships do
    not say (then every part is counted). The others (styles, themes, settings) are read too, but
    as they are: a docx's styles part alone is 349 KB in every document python-docx writes, and
    counting it doubled a parse's CPU."""
    main = _related(z, names, "", ("officeDocument",))
    if not main or len(main) != 1 or main[0] not in names:
        return None
    if kind == "docx":
        return main
    parts = _related(z, names, main[0], ("worksheet", "sharedStrings"))
    if parts is None or any(p not in names for p in parts):
        return None
    return [*main, *parts]


def _all_text(sections: list[Section]) -> str:
    return "\n".join(part for s in sections for part in (s.title, s.content()) if part)


# A docx's styles part, parsed once per thread and distinct content. python-docx parses every part of
# a package it opens, and the styles part of its default template (349 KB, in every document that
# python-docx writes) was half of a parse: 8.5 -> 4.5 ms of CPU a document over 103 of the office
# family's references (2026-12-04), the same parse. A parsed element is shared by the documents of
# its thread that carry the same bytes, so what ``_docx_document`` returns is only ever read (a
# paragraph's style looked up by id; ``parse_docx`` is its one caller). Bounds: a part over 512 KiB
# is parsed each time; two kept per thread (a tree is up to ~50x its bytes: <= ~50 MiB a thread).
_STYLES_KEPT = 2
_STYLES_MAX_BYTES = 512 << 10
_styles_by_thread = threading.local()


def _styles_element(blob: bytes) -> Any:
    from docx.oxml.parser import parse_xml

    if len(blob) > _STYLES_MAX_BYTES:
        return parse_xml(blob)
    kept: dict[bytes, Any] = _styles_by_thread.__dict__.setdefault("kept", {})
    element = kept.pop(blob, None)  # (a hit compares the whole bytes: content, not a checksum)
    if element is None:
        element = parse_xml(blob)
        while len(kept) >= _STYLES_KEPT:
            del kept[next(iter(kept))]  # the least recently used
    kept[blob] = element
    return element


def _docx_part(partname: Any, content_type: str, reltype: str, blob: bytes, package: Any) -> Any:
    """python-docx's ``PartFactory``: the same class for every part (its selector first, then the
    content type), the styles part's element from ``_styles_element``."""
    from docx.opc.part import PartFactory
    from docx.parts.styles import StylesPart

    selector = PartFactory.part_class_selector
    chosen = selector(content_type, reltype) if selector is not None else None  # (an image by relationship)
    if chosen is None and PartFactory._part_cls_for(content_type) is StylesPart:
        return StylesPart(partname, content_type, _styles_element(blob), package)
    return PartFactory(partname, content_type, reltype, blob, package)


def _docx_document(data: bytes) -> Any:
    """What python-docx's ``Document(io.BytesIO(data))`` returns (the same package reader and parts,
    the same check of the main part), its styles part from ``_styles_element``: to be read only."""
    from docx.opc.constants import CONTENT_TYPE as CT
    from docx.opc.package import Unmarshaller
    from docx.opc.pkgreader import PackageReader
    from docx.package import Package

    package = Package()
    reader = PackageReader.from_file(io.BytesIO(data))  # type: ignore[no-untyped-call]
    Unmarshaller.unmarshal(reader, package, _docx_part)  # type: ignore[no-untyped-call]
    part = package.main_document_part
    if part.content_type != CT.WML_DOCUMENT_MAIN:
        raise ValueError(f"not a Word file: its main part's content type is {part.content_type!r}")
    return part.document


def _style_index(doc: Any) -> dict[str, Any]:
    """The document's styles by id, the first of each id (as python-docx finds one)."""
    index: dict[str, Any] = {}
    for style in doc.styles.element.style_lst:
        index.setdefault(style.styleId, style)
    return index


def _paragraph_style_name(doc: Any, style_id: str | None, index: dict[str, Any]) -> str:
    """The name of the paragraph style ``style_id`` names, resolved as python-docx resolves it (the
    first style with that id if it is a paragraph style, else the default paragraph style), but
    matched by value: python-docx finds it by an XPath holding the id unquoted, so an id such as
    ``x"] | //w:style[@w:styleId="Heading1`` selected another style (text Word shows as body read
    as a heading; found by a reviewer, 2026-12-04). ``index``: ``_style_index(doc)`` (a scan of every
    style for each id made a document of many ids and many styles quadratic)."""
    from docx.enum.style import WD_STYLE_TYPE
    from docx.styles.style import StyleFactory

    found = index.get(style_id) if style_id is not None else None
    if found is not None and found.type == WD_STYLE_TYPE.PARAGRAPH:
        return StyleFactory(found).name or ""
    default = doc.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    return (default.name if default is not None else "") or ""


def parse_docx(data: bytes) -> ParsedDocument:
    _unzipped(data, "docx")
    try:
        doc = _docx_document(data)
    except Exception as e:  # a damaged package: python-docx raises many kinds
        raise DocumentError(f"the docx file does not open: {type(e).__name__}: {e}") from None
    try:
        sections = _docx_sections(doc)
    except Exception as e:  # parts that open but do not read: a style id, a relationship, a nesting
        raise DocumentError(f"the docx file does not read: {type(e).__name__}: {e}") from None
    kept = [s for s in sections if s.title or s.content()]
    return ParsedDocument("docx", _all_text(kept), kept)


def _docx_sections(doc: Any) -> list[Section]:
    from docx.table import Table as DocxTable
    from docx.text.paragraph import Paragraph

    current = Section(title="", level=0)
    sections = [current]
    # A paragraph's style name, by the style id it names: python-docx looks a style up by scanning
    # every style of the document, each time (half of a parse of the office family's documents).
    style_names: dict[str | None, str] = {}
    index: dict[str, Any] | None = None  # (built at the first style looked up)
    for child in doc.element.body.iterchildren():
        tag = child.tag.rsplit("}", 1)[-1]
        if tag == "p":
            text = Paragraph(child, doc).text.strip()
            style_id = child.style
            if style_id not in style_names:
                if index is None:
                    index = _style_index(doc)
                style_names[style_id] = _paragraph_style_name(doc, style_id, index)
            style = style_names[style_id]
            if not text:
                continue
            if style == "Title" or style.startswith("Heading"):
                digits = style.removeprefix("Heading").strip()
                current = Section(title=text, level=int(digits) if digits.isdigit() else 1)
                sections.append(current)
            elif style.startswith("List") or child.find(".//{*}numPr") is not None or _BULLET.match(text):
                item = m.group(1).strip() if (m := _BULLET.match(text)) else text
                current.bullets.append(item)
                if (pair := field_of(item)) is not None:
                    current.fields.append(pair)
            elif (pair := field_of(text)) is not None:
                current.fields.append(pair)
            else:
                current.paragraphs.append(text)
        elif tag == "tbl":
            rows = [[c.text.strip() for c in r.cells] for r in DocxTable(child, doc).rows]
            if rows:
                table = Table(columns=rows[0], rows=rows[1:])
                current.tables.append(table)
                if len(table.columns) == 2:
                    current.fields += [(r[0], r[1]) for r in table.rows if len(r) == 2 and r[0]]
    return sections


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime.datetime):
        return value.date().isoformat() if value.time() == datetime.time() else value.isoformat()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value).strip()


def parse_xlsx(data: bytes) -> ParsedDocument:
    _unzipped(data, "xlsx")
    import openpyxl

    try:
        book = openpyxl.load_workbook(io.BytesIO(data), data_only=True)
    except Exception as e:  # a damaged package: openpyxl raises many kinds
        raise DocumentError(f"the xlsx file does not open: {type(e).__name__}: {e}") from None
    sections = []
    for sheet in book.worksheets:
        if sheet.max_row * sheet.max_column > MAX_CELLS:
            raise DocumentError(f"sheet {sheet.title!r} has more than {MAX_CELLS} cells")
        section = Section(title=sheet.title.strip(), level=1)
        table: Table | None = None
        for row in sheet.iter_rows(values_only=True):
            cells = [_cell_text(v) for v in row]
            while cells and not cells[-1]:
                cells.pop()
            if not any(cells):
                table = None
            elif table is not None:
                table.rows.append(cells + [""] * (len(table.columns) - len(cells)))
            elif sum(bool(c) for c in cells) >= 3:
                table = Table(columns=cells)
                section.tables.append(table)
            elif len(cells) == 2 and cells[0]:
                section.fields.append((cells[0].rstrip(":").strip(), cells[1]))
            elif len(cells) == 1:
                m = _BULLET.match(cells[0])
                (section.bullets if m else section.paragraphs).append(m.group(1).strip() if m else cells[0])
            else:
                section.paragraphs.append(" ".join(c for c in cells if c))
        sections.append(section)
    return ParsedDocument("xlsx", _all_text(sections), sections)


_FIRST_IMPORT = threading.Lock()


def _imported(package: str) -> None:
    """``package`` imported whole before any of its modules is, one thread at a time. Documents are
    parsed on worker threads: two first parses at once, one importing ``docx`` (whose ``__init__``
    imports ``docx.opc.part``, then sets ``PartFactory.part_class_selector``) and one importing
    ``docx.opc.part`` (which imports ``docx``), deadlock on the two module locks, which CPython
    breaks by handing one thread a half-initialised module: a reference's document did not open
    (AttributeError), and the first audit of ``family:office`` in a process found tasks
    unverifiable (1 in 5 runs of 8 threads, /root/scratch/s1210/docx_race.py)."""
    import importlib

    with _FIRST_IMPORT:  # (once imported, a lookup in sys.modules)
        importlib.import_module(package)


def parse_document(format: str, content: str | bytes) -> ParsedDocument:
    """``content`` (text for text/markdown/json, bytes for docx/xlsx) in the one shape;
    ``DocumentError`` when it does not parse or is empty."""
    if format in ("docx", "xlsx"):
        if not isinstance(content, bytes):
            raise TypeError(f"a {format} document is bytes")
        _imported("docx" if format == "docx" else "openpyxl")
        doc = parse_docx(content) if format == "docx" else parse_xlsx(content)
    else:
        text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
        if format == "text":
            doc = ParsedDocument("text", text, [])
        elif format == "json":
            doc = parse_json(text)
        elif format == "markdown":
            doc = parse_markdown(text)
        else:
            raise ValueError(f"unknown document format {format!r}")
    if not doc.text.strip():
        raise DocumentError("the document is empty")
    return doc
