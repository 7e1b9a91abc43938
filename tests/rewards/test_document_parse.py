"""A docx parsed on the host: the same parse as through python-docx's own ``Document()``, with the
styles part kept by content (``document_parse._docx_document``)."""

from __future__ import annotations

import io
import posixpath
import zipfile

import docx
import openpyxl
import pytest

from dojo.rewards import document_parse
from dojo.rewards.document_parse import DocumentError, parse_docx


def _written(document: docx.document.Document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _report() -> bytes:
    d = docx.Document()
    d.add_heading("Quarterly report", level=0)
    d.add_paragraph("Prepared by: Finance")
    d.add_heading("Figures", level=1)
    d.add_paragraph("Revenue: $1,200")
    d.add_paragraph("An item", style="List Bullet")
    d.add_paragraph("Numbered", style="List Number")
    d.add_paragraph("Quoted text", style="Quote")
    table = d.add_table(rows=3, cols=3)
    for i in range(3):
        for j in range(3):
            table.cell(i, j).text = f"r{i}c{j}"
    table.cell(1, 0).merge(table.cell(1, 1))
    d.add_heading("Fields", level=2)
    pairs = d.add_table(rows=2, cols=2)
    pairs.cell(0, 0).text, pairs.cell(0, 1).text = "Name", "Acme"
    pairs.cell(1, 0).text, pairs.cell(1, 1).text = "Total", "$5"
    d.add_paragraph("- a dash bullet")
    return _written(d)


def _with_part(data: bytes, name: str, content: bytes | None) -> bytes:
    """``data`` with the zip entry ``name`` replaced by ``content`` (None: left out)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename == name:
                if content is not None:
                    dst.writestr(item, content)
            else:
                dst.writestr(item, src.read(item.filename))
    return out.getvalue()


def _renamed_heading_style(data: bytes) -> bytes:
    """The same document, its styles part naming the style with id ``Heading1`` "Body Text": Word
    shows those paragraphs as body text, so no section may start there."""
    style = b'w:styleId="Heading1"><w:name w:val='
    return _edited(data, "word/styles.xml", style + b'"heading 1"/>', style + b'"Body Text"/>')


def _through_python_docx(data: bytes) -> document_parse.ParsedDocument:
    """The parse as it was: python-docx's own ``Document()`` opens the package."""
    real = document_parse._docx_document
    document_parse._docx_document = lambda raw: docx.Document(io.BytesIO(raw))
    try:
        return parse_docx(data)
    finally:
        document_parse._docx_document = real


def _no_styles(data: bytes) -> bytes:
    """No styles part at all (nor its relationship): python-docx then uses its default styles."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        rels = z.read("word/_rels/document.xml.rels").decode()
    start = rels.rindex("<Relationship ", 0, rels.index("/relationships/styles"))
    end = rels.index("/>", start) + 2
    data = _with_part(data, "word/_rels/document.xml.rels", (rels[:start] + rels[end:]).encode())
    return _with_part(data, "word/styles.xml", None)


@pytest.mark.parametrize("variant", ["plain", "renamed heading style"])
def test_a_docx_parses_as_through_python_docx(variant: str) -> None:
    data = _report() if variant == "plain" else _renamed_heading_style(_report())
    assert parse_docx(data) == _through_python_docx(data)
    assert parse_docx(data) == _through_python_docx(data)  # the second time from the kept styles


def test_documents_with_other_styles_each_get_their_own_style_names() -> None:
    plain, renamed = _report(), _renamed_heading_style(_report())
    titles = []
    for data in (plain, renamed, plain, renamed):
        titles.append([s.title for s in parse_docx(data).sections])
    assert titles[0] == titles[2] == ["Quarterly report", "Figures", "Fields"]
    assert titles[1] == titles[3] == ["Quarterly report", "Fields"]  # "Figures" is body text there
    assert titles[1] == [s.title for s in _through_python_docx(renamed).sections]


def test_a_package_that_is_not_a_word_document_does_not_parse() -> None:
    book = openpyxl.Workbook()
    book.active["A1"] = "a spreadsheet"
    out = io.BytesIO()
    book.save(out)
    with pytest.raises(DocumentError, match=r"does not open.*not a Word file"):
        parse_docx(out.getvalue())


def test_a_docx_without_a_styles_part_parses_with_the_default_styles_as_python_docx_does() -> None:
    data = _no_styles(_report())
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert "word/styles.xml" not in z.namelist()
    assert parse_docx(data) == _through_python_docx(data)
    assert "Revenue: $1,200" in parse_docx(data).text  # (its default styles name no heading: no sections)


def _edited(data: bytes, name: str, old: bytes, new: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        content = z.read(name)
    assert old in content
    return _with_part(data, name, content.replace(old, new, 1))


def test_a_styles_part_reached_as_an_image_is_an_image_part_as_in_python_docx() -> None:
    """python-docx picks a part's class by its relationship first (an image relationship makes an
    image part, whatever the content type): so must the parse that keeps styles parts."""
    kind = b"http://schemas.openxmlformats.org/officeDocument/2006/relationships/image"
    image = b'<Relationship Id="rIdX" Type="' + kind + b'" Target="styles.xml"/>'
    data = _edited(_report(), "word/_rels/document.xml.rels", b"<Relationship ", image + b"<Relationship ")
    with pytest.raises(DocumentError, match="does not read") as ours:
        parse_docx(data)
    with pytest.raises(DocumentError, match="does not read") as theirs:
        _through_python_docx(data)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "style_id",
    ['x"] | //w:style[@w:styleId="Heading1', 'Heading1" or "1"="1', 'x"] | //w:style[1]/@w:styleId | //w:x[@a="'],
)
def test_a_style_id_cannot_select_another_style_through_python_docxs_xpath(style_id: str) -> None:
    """A paragraph whose style id names no style is in the default paragraph style (as Word shows
    it), however the id is spelled: python-docx's lookup puts the id into an XPath unquoted."""
    quoted = style_id.replace('"', "&quot;").encode()
    data = _edited(_report(), "word/document.xml", b'w:val="Heading1"', b'w:val="' + quoted + b'"')
    parsed = parse_docx(data)
    assert "Figures" not in [s.title for s in parsed.sections]
    assert "Figures" in parsed.sections[0].paragraphs  # (after the title: body text of its section)


def test_a_docx_whose_body_does_not_read_scores_as_a_document_that_does_not_parse() -> None:
    """A style of a type python-docx does not know raises in the middle of the body: a DocumentError
    (the candidate's 0), never an exception out of the grader."""
    data = _edited(_report(), "word/styles.xml", b'w:type="paragraph" w:default="1"', b'w:type="bogus" w:default="1"')
    with pytest.raises(DocumentError, match="does not read"):
        parse_docx(data)


@pytest.mark.parametrize(
    ("kind", "part", "element", "limit"),
    [
        ("docx", "word/document.xml", b"<w:p/>", document_parse.MAX_BLOCKS),
        ("docx", "word/document.xml", b"<w:tc><w:p/></w:tc>", document_parse.MAX_BLOCKS // 2),
        ("xlsx", "xl/worksheets/sheet1.xml", b'<c r="A1"/>', document_parse.MAX_CELLS),
        ("xlsx", "xl/worksheets/sheet1.dat", b'<c r="A1"/>', document_parse.MAX_CELLS),  # (any part's name)
        # one element that the parse turns into many: a cell spanning columns, a merged range
        ("docx", "word/document.xml", b'<w:tc><w:tcPr><w:gridSpan w:val="30000"/></w:tcPr></w:tc>', 0),
        ("xlsx", "xl/worksheets/sheet1.xml", b'<mergeCells><mergeCell ref="A1:XFD1048576"/></mergeCells>', 0),
    ],
)
def test_a_package_holding_more_than_the_parse_may_meet_does_not_parse(
    kind: str, part: str, element: bytes, limit: int
) -> None:
    """Counted in its XML before python-docx or openpyxl read it (their parse of 1.7 million paragraphs
    held the grader 115 s; an xlsx's rows may all claim row 1, so openpyxl's own sheet size says nothing)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(part, b"<root>" + element * (limit + 1) + b"</root>")
    with pytest.raises(DocumentError, match="holds more than"):
        document_parse.parse_document(kind, out.getvalue())


def _repacked(body: bytes, main: str = "word/document.xml") -> bytes:
    """A docx python-docx wrote, its body replaced by ``body`` and its main part stored as ``main``."""
    zin = zipfile.ZipFile(io.BytesIO(_written(docx.Document())))
    ns = b'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for entry in zin.infolist():
            name, data = entry.filename, zin.read(entry)
            if name == "word/document.xml":
                name, data = main, b"<w:document " + ns + b"><w:body>" + body + b"</w:body></w:document>"
            elif name == "word/_rels/document.xml.rels":
                name = posixpath.join("word/_rels", posixpath.basename(main) + ".rels")
            elif name in ("[Content_Types].xml", "_rels/.rels"):
                data = data.replace(b"word/document.xml", main.encode())
            z.writestr(name, data)
    return out.getvalue()


def test_the_parts_the_parse_reads_are_counted_whatever_their_names_and_elements() -> None:
    """Empty runs or rows cost python-docx and openpyxl as much as paragraphs (2.7 million empty runs
    in 58 KiB held the grader 76 s); the main part may have any name its relationships give it."""
    with pytest.raises(DocumentError, match="XML elements"):
        document_parse.parse_document(
            "docx", _repacked(b"<w:p>" + b"<w:r/>" * (document_parse.MAX_TAGS["docx"] + 1) + b"</w:p>")
        )
    renamed = _repacked(b"<w:p/>" * (document_parse.MAX_BLOCKS + 1), main="word/document.dat")
    with pytest.raises(DocumentError, match="paragraphs and table cells"):
        document_parse.parse_document("docx", renamed)
    fine = document_parse.parse_document(
        "docx", _repacked(b"<w:p><w:r><w:t>Hello there</w:t></w:r></w:p>", "word/main.dat")
    )
    assert fine.text == "Hello there"


def _damaged(how: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"<w:p>hello</w:p>" * 200)
    data = bytearray(out.getvalue())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("word/document.xml")
    central = bytes(data).rfind(b"PK\x01\x02")
    if how == "a bad deflate block":
        data[info.header_offset + 30 + len(info.filename) + len(info.extra)] = 0xFF
    elif how == "an unknown method":
        data[info.header_offset + 8 : info.header_offset + 10] = data[central + 10 : central + 12] = (99).to_bytes(
            2, "little"
        )
    else:  # encrypted
        data[info.header_offset + 6] |= 1
        data[central + 8] |= 1
    return bytes(data)


@pytest.mark.parametrize("how", ["a bad deflate block", "an unknown method", "encrypted"])
@pytest.mark.parametrize("kind", ["docx", "xlsx"])
def test_a_damaged_package_does_not_parse_and_raises_nothing_else(how: str, kind: str) -> None:
    with pytest.raises(DocumentError, match="not a valid"):
        document_parse.parse_document(kind, _damaged(how))


def test_a_document_of_many_styles_and_style_ids_parses_in_one_pass_over_its_styles() -> None:
    """Each style id was looked up by a scan of every style: 10,000 ids over 20,000 styles is 2e8
    steps (minutes of the grader); they are indexed once a document now."""
    zin = zipfile.ZipFile(io.BytesIO(_written(docx.Document())))
    styles = b"".join(
        b'<w:style w:type="paragraph" w:styleId="S%d"><w:name w:val="Style %d"/></w:style>' % (i, i)
        for i in range(20_000)
    )
    body = b"".join(
        b'<w:p><w:pPr><w:pStyle w:val="S%d"/></w:pPr><w:r><w:t>line %d</w:t></w:r></w:p>' % (i, i)
        for i in range(10_000)
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for entry in zin.infolist():
            data = zin.read(entry)
            if entry.filename == "word/styles.xml":
                data = data.replace(b"</w:styles>", styles + b"</w:styles>")
            elif entry.filename == "word/document.xml":
                data = data.replace(b"<w:body>", b"<w:body>" + body, 1)
            z.writestr(entry, data)
    doc = parse_docx(out.getvalue())
    assert doc.text.count("line ") == 10_000 and "line 9999" in doc.text
