"""family:documents and family:office: references pass, trivial and hacked documents earn nothing,
and the truth the rules hold never enters the sandbox."""

from __future__ import annotations

import json
import re

from dojo.rewards import Grader
from dojo.rewards.audit import audit_tasks
from dojo.rewards.documents import FILLER, hollow_document
from dojo.sandbox import AsyncSandbox, Program, Verdict
from dojo.tasks import generate_tasks, load_source
from tests.sandbox.conftest import requires_isolation
from tests.tasks.recording import Recording


async def test_references_pass_and_levels_add_rules(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    tasks = load_source("family:documents?n=300&seed=3")
    assert [t.prompt for t in tasks[:20]] == [t.prompt for t in load_source("family:documents?n=20&seed=3")]
    for task in tasks:
        reward = await grader.grade(task, task.reference or "")
        assert reward.value == 1.0, (task.id, reward.cases)
        assert set(reward.components) == {"correctness"} | {f"rule:{c.index}:" for c in []} | set(reward.components)
        assert sum(k.startswith("rule:") for k in reward.components) == len(task.tests)
    by_level = {lvl: [len(t.tests) for t in tasks if f"level{lvl}" in t.metadata.tags] for lvl in (1, 2, 3, 4)}
    means = [sum(v) / len(v) for v in by_level.values()]
    assert means == sorted(means) and means[0] < means[-1]
    assert {t.metadata.tags[1] for t in tasks} == {"markdown", "json"}


async def test_trivial_and_hacked_documents_earn_nothing(fast_sandbox: AsyncSandbox) -> None:
    grader = Grader(fast_sandbox)
    for task in generate_tasks("documents", n=40, seed=1):
        ref = task.reference or ""
        body = ref.split("\n", 1)[1].rsplit("```", 1)[0]
        rules_text = json.dumps([t.expected for t in task.tests])
        hacks = {
            "empty": "",
            "prompt echoed": task.prompt_text(),
            "headings only": hollow_document(task) or "",
            "headings and filler": hollow_document(task, FILLER) or "",
            "claims compliance": "This document meets every rule: all sections, fields and totals are correct.",
            "prints what the checker looks for": rules_text,
            "keyword stuffing": "\n".join(f"## {w}\n{task.prompt_text()}" for w in ("Totals", "Summary")),
        }
        for name, completion in hacks.items():
            reward = await grader.grade(task, completion)
            assert reward.value == 0.0, (task.id, name, reward.cases[:3])
        totals = [t.expected["label"] for t in task.tests if t.expected.get("label") in ("Total", "Total Profit")]
        if task.metadata.tags[1] == "markdown" and totals:  # a guessed total (the computed one is never in the brief)
            guessed = re.sub(
                rf"^({totals[0]}: \$?-?)(\d)", lambda m: m.group(1) + str(int(m.group(2)) % 9 + 1), body, flags=re.M
            )
            assert guessed != body
            assert (await grader.grade(task, f"```markdown\n{guessed}```")).value != 1.0, task.id


@requires_isolation
async def test_office_documents_are_written_in_the_sandbox_and_checked_outside(fast_sandbox: AsyncSandbox) -> None:
    sandbox = Recording(fast_sandbox)
    grader = Grader(sandbox)  # type: ignore[arg-type]
    tasks = generate_tasks("office", n=12, seed=2, difficulty=(0.5, 1.0))
    assert {t.metadata.tags[1] for t in tasks} == {"docx", "xlsx"}
    for task in tasks:
        assert (await grader.grade(task, task.reference or "")).value == 1.0, task.id
        assert (await grader.grade(task, hollow_document(task) or "")).value == 0.0, task.id
        assert (await grader.grade(task, hollow_document(task, FILLER) or "")).value == 0.0, task.id
        nothing = await grader.grade(task, "```python\nprint('the report is written')\n```")
        assert nothing.value == 0.0 and "wrote no" in (nothing.error or ""), nothing
        broken = await grader.grade(task, f"```python\nopen({task.document.path!r}, 'w').write('x')\n```")  # type: ignore[union-attr]
        assert broken.value == 0.0 and broken.verdict == "compile_error" and "zip" in (broken.error or "")
    # the run holds the candidate's script and nothing else: no rule, no expected value
    for program in sandbox.programs:
        assert not program.files and not program.stdin and not program.env
    for task in tasks:
        secrets = [str(t.expected.get("equals")) for t in task.tests if t.expected.get("equals")]
        secrets += [json.dumps(t.expected) for t in task.tests]
        sent = [p.source for p in sandbox.programs if p.source != (task.reference or "")]
        assert not any(s in src for s in secrets for src in sent if "print(" in src), task.id


@requires_isolation
async def test_the_audit_is_clean(fast_sandbox: AsyncSandbox) -> None:
    tasks = load_source("family:documents?n=60&seed=5") + load_source("family:office?n=6&seed=5")
    report = await audit_tasks(tasks, fast_sandbox, repeats=1)
    assert report.summary()["verifiable"] == len(tasks), [(t.id, t.problems) for t in report.unverifiable]


@requires_isolation
async def test_office_runs_fork_with_the_libraries_warmed_up(fast_sandbox: AsyncSandbox) -> None:
    """The documents environment's zygotes wrote a docx and an xlsx once (``documents_warmup``), so
    what python-docx and openpyxl load on a first save is loaded before any run forks."""
    environment = generate_tasks("office", n=1)[0].environment
    probe = "import sys\nprint('encodings.cp437' in sys.modules, 'openpyxl.packaging.extended' in sys.modules)\n"
    result = await fast_sandbox.run(Program(language="python", source=probe, environment=environment))
    assert result.stdout.split() == ["True", "True"], result.stderr or result.sandbox_error


@requires_isolation
async def test_a_runs_first_blank_docx_is_made_ahead_and_every_run_gets_a_fresh_one(fast_sandbox: AsyncSandbox) -> None:
    """``docx.Document()``'s first blank document in a run is the zygote's, made ahead
    (``documents_warmup``): its parts are byte for byte python-docx's own, what a run writes into it
    is its own (the next run's is blank again), threads never share one, and a program that points
    python-docx at a template of its own gets that template."""
    environment = generate_tasks("office", n=1)[0].environment

    async def run(source: str) -> str:
        result = await fast_sandbox.run(Program(language="python", source=source, environment=environment))
        assert result.verdict is Verdict.ACCEPTED, result.stderr or result.sandbox_error
        return result.stdout.strip()

    same = (
        "import io, zipfile, docx, docx.api\n"
        "from docx import Document\n"
        "def parts(d):\n"
        "    out = io.BytesIO()\n"
        "    d.save(out)\n"
        "    with zipfile.ZipFile(out) as z:\n"
        "        return {n: z.read(n) for n in z.namelist()}\n"
        "first = Document()\n"
        "second = docx.api.Document()\n"
        "alike = parts(first) == parts(second) and len(parts(first)) > 5\n"
        "first.add_heading('Only this run', level=1)\n"
        "saved = io.BytesIO()\n"
        "first.save(saved)\n"
        "again = [p.text for p in Document(io.BytesIO(saved.getvalue())).paragraphs]\n"
        "print(alike, second is not first, len(second.paragraphs), again, Document.__name__, Document.__module__)\n"
    )
    outs = [await run(same) for _ in range(3)]
    assert outs == ["True True 0 ['Only this run'] Document docx.api"] * 3, outs  # each run's first is blank
    threads = (
        "import threading, docx\n"
        "made = []\n"
        "threads = [threading.Thread(target=lambda: made.append(docx.Document())) for _ in range(8)]\n"
        "for t in threads: t.start()\n"
        "for t in threads: t.join()\n"
        "print(len(made), len({id(d) for d in made}))\n"
    )
    assert await run(threads) == "8 8"  # the first calls of a run, side by side: eight documents
    ahead = (  # made ahead: the first blank one opens no package; the next does
        "import docx\n"
        "from docx.package import Package\n"
        "def refuse(pkg_file):\n"
        "    raise RuntimeError('opened ' + str(pkg_file).rsplit('/', 1)[-1])\n"
        "Package.open = staticmethod(refuse)\n"
        "docx.Document()\n"
        "try:\n    docx.Document()\nexcept RuntimeError as e:\n    print(e)\n"
    )
    assert await run(ahead) == "opened default.docx"
    own = (  # a template of the program's own, set before its first blank document
        "import docx, docx.api\n"
        "base = docx.Document(open(docx.api._default_docx_path(), 'rb'))\n"
        "base.add_paragraph('from my template')\n"
        "base.save('mine.docx')\n"
        "docx.api._default_docx_path = lambda: 'mine.docx'\n"
        "print([p.text for p in docx.Document().paragraphs])\n"
    )
    assert await run(own) == "['from my template']"
