"""The ``documents`` environment's warm-up: the zygote of a ``documents`` slot runs this once, after
importing python-docx and openpyxl, so each run's first document finds built what the libraries
build lazily on first use (a heading's and a table's styles looked up, a package zipped, a workbook
written). Measured (2026-12-04) on the office family's references, forked 30 times from an
interpreter that had imported both, four rounds interleaved: a docx reference 35.8 -> 30.3 ms of CPU
at the median, an xlsx one 16.3 -> 13.0 ms. Everything stays in memory; nothing starts a thread.

Last, a blank document made ahead: ``docx.Document()``'s first blank document in a run is the
zygote's, made here, rather than one read and parsed from python-docx's template (each run is a
fork, so each gets its own copy; its parts are byte for byte what a call makes). Later calls, a
call with a file, and any call once the program has pointed python-docx at a template of its own
(``docx.api._default_docx_path``) are python-docx's own. What a program can tell: ``docx.Document``
is this module's wrapper (``__wrapped__`` is python-docx's), and a failing ``Document(path)``'s
traceback has one more frame, this one. Measured (2026-12-07) on the office family's docx
references, forked 30 times from an interpreter that had run this warm-up, three rounds
interleaved: 28.6-31.1 -> 20.8-21.0 ms of CPU at the median, page faults 2,905-2,955 -> 1,695-1,700.
The warm-up's own objects are dropped (idle memory per slot: ~5 MB; the blank document is ~5 MB).
Runs inside the sandbox; imports what the environment provides.
"""

import functools
import io
from typing import IO

import docx
import docx.api as docx_api
import openpyxl
from docx.document import Document as WordDocument

document = docx.Document()
document.add_heading("Title", level=0)
document.add_heading("Section", level=1)
document.add_paragraph("Field: value")
document.add_paragraph("An item", style="List Bullet")
table = document.add_table(rows=2, cols=2)
table.cell(0, 0).text = "Name"
table.cell(1, 1).text = "1"
document.save(io.BytesIO())

book = openpyxl.Workbook()
sheet = book.active
sheet.title = "Summary"
sheet.append(["Name", "Quantity", "Amount"])
sheet.append(["Item", 2, 10.5])
book.save(io.BytesIO())

del document, table, book, sheet  # (kept alive by the wrapper's globals otherwise)

_make_document = docx_api.Document
_template_path = docx_api._default_docx_path  # (a program that replaces it wants its own template)
_blank = [_make_document()]  # (list.pop is one step: two threads never get the same one)


@functools.wraps(_make_document)
def _document(docx: str | IO[bytes] | None = None) -> WordDocument:  # (python-docx's parameter name)
    if docx is None and docx_api._default_docx_path is _template_path:
        try:
            return _blank.pop()
        except IndexError:
            pass
    return _make_document(docx)


docx.Document = docx_api.Document = _document
