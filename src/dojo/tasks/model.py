"""The task model: what a model is asked, and everything a grader needs to check the answer.

A task has one *form*, which says how a candidate is graded:

- ``function``: call a named function with arguments; return values are compared in the grader;
- ``stdio``: a program reads stdin and writes stdout; output compared token by token (or by a checker);
- ``assert``: HumanEval-style ``check(candidate)`` code run after the candidate;
- ``answer``: one final answer extracted from text and compared (exact or numeric); with
  ``answer_match="fields"``, a JSON report whose fields are compared one by one (``dojo.rewards.report``);
- ``repo``: a file tree (``Workspace``: packages from the task's environment, files over them) that
  the candidate edits; its hidden tests (pytest node ids) run in the sandbox on the edited tree;
- ``shell``: a file tree the candidate works on with a bash script (or an agent's shell commands);
  graded by checks on the final state (files, modes, archives, output), compared outside;
- ``tools``: tool schemas (``Task.tools``, OpenAI function format); the candidate's calls are
  checked outside against allowed-value answers (or: no call at all, when none of the tools fits).
  With an ``api`` (``ApiScenario``: a simulated, stateful API and the user's turns) the task is
  multi-turn: the calls run on the API in the sandbox, and after each turn the API's state and the
  calls' results are compared outside with those of the gold calls (BFCL's multi-turn rule).
- ``analysis``: a Python program runs on the task's data files (``workspace``) in its environment
  and writes ``answer.json``, fetched back and compared here field by field with the tolerances each
  test declares (``dojo.rewards.analysis``); with an ``entry_point``, dojo's driver runs each test's
  ``code`` after the candidate's functions and the values of its capture expressions are the fields.
- ``document``: the candidate produces a document (text, Markdown or JSON in its reply; DOCX or
  XLSX written by its Python script in the sandbox and fetched back); each test is one declarative
  rule (``dojo.tasks.rules``) checked on the host on the parsed document.

Tests are ``visible`` (may be shown in the prompt) or hidden (never shown, graded on).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from dojo.sandbox import Limits
from dojo.tasks.canaries import TestNode
from dojo.tasks.rules import FILE_FORMATS, DocumentSpec, parse_rule

TaskForm = Literal["function", "stdio", "assert", "answer", "repo", "shell", "tools", "analysis", "document"]
FORMS: tuple[str, ...] = ("function", "stdio", "assert", "answer", "repo", "shell", "tools", "analysis", "document")
# Paths a repo task's candidate never changes, whatever its edits say: the tests that grade it and
# the files pytest or Python would run before them.
PROTECTED_PATHS: tuple[str, ...] = (
    "tests/*",
    "test/*",
    "*/tests/*",
    "*/test/*",
    "test_*.py",
    "*/test_*.py",
    "*_test.py",
    "conftest.py",
    "*/conftest.py",
    "sitecustomize.py",
    "*/sitecustomize.py",
    "usercustomize.py",
    "*.pth",
    "pytest.ini",
    "*/pytest.ini",
    "setup.cfg",
    "tox.ini",
    "pyproject.toml",
    "*/pyproject.toml",
)
AnswerMatch = Literal["exact", "numeric", "reasoning_gym", "fields"]
# What runs a repo task's tests: these distributions, as dojo's own environment has them (pure
# Python), adopted into the task's environment (``EnvironmentStore.adopt``).
TEST_RUNNER: tuple[str, ...] = ("pytest", "pluggy", "iniconfig", "packaging", "pygments")


def tool_name(name: str) -> str:
    """A function name as OpenAI tool names allow it (letters, digits, ``_``, ``-``): a source's
    dotted names (``math.hypot``) become ``math_hypot``; graders accept either."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)


class Message(BaseModel):
    """One chat message of a prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str


class Canary(BaseModel):
    """How a scored repo test's canary copies are drawn (``dojo.tasks.canaries``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    site: int = Field(0, ge=0, description="The expected value the copies change: an index into literal_sites.")
    avoid: list[int | float | str] = Field(
        default_factory=list,
        description="Values no copy expects at the site: what the tree as given computes there (a canary "
        "expecting it would pass on the bug).",
    )


class TestCase(BaseModel):
    """One check. Which fields matter depends on the task's form:

    - function: ``args``/``kwargs`` in, ``expected`` return value;
    - stdio: ``stdin`` in, ``expected`` stdout (a string);
    - assert: ``code``, Python defining ``check(candidate)``;
    - answer: ``expected`` answer (a string);
    - repo: ``code``, the pytest node id of a test (``path/test_x.py::TestX::test_y``); ``expected``
      ``"guard"`` for a test that must keep passing but is not scored (a regression guard);
    - tools with an ``api``: ``expected``, ``{"turns": [[gold call, ...], ...]}`` and, for a
      ``final_state`` check, ``"say": [text, ...]``: what the agent's replies must tell the user;
    - tools: ``expected``, ``{"calls": [{name: {param: [allowed values]}}, ...]}`` (BFCL's answer
      form; ``""`` allowed means the parameter may be left out), ``{"no_call": true}`` or
      ``{"any_call": true}``;
    - analysis: ``expected``, one field of the answer file and how it is compared, e.g.
      ``{"field": "revenue.north", "value": 1234.5, "rel": 1e-6, "abs": 1e-6}`` (``"unordered": true``:
      a list compared as a multiset; ``"reference": true`` instead of a value: the reference's value,
      from its own sandbox run in the same grading). With an entry point (SciCode), ``code`` is the
      test case's code, each assert rewritten into a capture of the values it compares, and the
      field is that case's captures (``cases.<i>``), compared with the reference's;
    - shell: ``expected``, one check of the final state (``dojo.rewards.shell.CHECKS``), e.g.
      ``{"path": "out/a.txt", "sha256": "..."}``, ``{"path": "x.tmp", "exists": false}``;
    - document: ``expected``, one rule (``dojo.tasks.rules``), e.g. ``{"kind": "sections", "titles": [...]}``.
    """

    __test__ = False  # not a pytest class
    model_config = ConfigDict(frozen=True, extra="forbid")

    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    stdin: str = ""
    expected: Any = None
    code: str | None = None
    visible: bool = False
    canary: Canary | None = Field(
        None,
        description="repo: this scored test is graded with canary copies (dojo.tasks.canaries); its file must "
        "be among the workspace's files. None: no canaries.",
    )

    @property
    def guard(self) -> bool:
        """A regression guard (repo: ``expected="guard"``; shell: a check with ``"guard": true``): it
        must pass, but is not scored."""
        return self.expected == "guard" or (isinstance(self.expected, dict) and bool(self.expected.get("guard")))

    @field_validator("args", "kwargs", "expected")
    @classmethod
    def _json_values(cls, v: Any) -> Any:
        try:
            json.dumps(v)
        except (TypeError, ValueError) as e:
            raise ValueError(f"test values must be JSON data (numbers, strings, lists, dicts): {e}") from e
        return v


class Workspace(BaseModel):
    """The file tree a ``repo`` task starts from; the run's work tree. ``packages`` are top-level
    directories of the task's environment (their files are the originals: read-only, never sent
    with a task), ``files`` are texts over them (a changed module, a new file). A candidate may
    change the paths that match ``editable`` and none that match ``protected``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    packages: list[str] = Field(default_factory=list, description="Directories from the task's environment.")
    files: dict[str, str] = Field(default_factory=dict, description="Path (relative) -> text, over the packages.")
    executable: list[str] = Field(default_factory=list, description="Paths of files written with mode 755.")
    directories: list[str] = Field(default_factory=list, description="Directories made (empty ones too).")
    binary: list[str] = Field(
        default_factory=list, description="analysis form: paths whose text is the base64 of the file's bytes (Parquet)."
    )
    editable: list[str] = Field(
        default_factory=lambda: ["*.py"], description="fnmatch patterns a candidate may change."
    )
    protected: list[str] = Field(
        default_factory=lambda: list(PROTECTED_PATHS), description="Never taken from a candidate."
    )

    @field_validator("packages")
    @classmethod
    def _package_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not name.isidentifier():
                raise ValueError(f"workspace package {name!r} is not a top-level module name")
        return v

    @field_validator("files")
    @classmethod
    def _relative_paths(cls, v: dict[str, str]) -> dict[str, str]:
        for path in v:
            parts = path.split("/")
            if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise ValueError(f"workspace path {path!r} must be relative, without '.' or '..' parts")
        return v


class ApiScenario(BaseModel):
    """A ``tools`` task's simulated, stateful API and the conversation over it (BFCL's multi-turn
    categories). ``classes`` are instantiated from ``modules`` (importable in the task's
    environment) and loaded with ``config[class]`` (``obj._load_scenario(config, long_context=)``,
    BFCL's convention; ``stateless`` classes are not loaded). ``turns`` are the user's messages,
    one per turn, the first included (``""``: the user says nothing new, e.g. a turn where
    functions are added); ``added`` names the tools held back until a turn (they are in
    ``Task.tools`` but offered from that turn on). The test's ``expected`` is ``{"turns": [[call,
    ...], ...]}``: the gold calls of each turn, as Python call text (``cd(folder='x')``); a turn
    with no gold call is not checked (the user asked for something the tools cannot do yet).

    ``check`` says when the state is compared: ``each_turn`` (BFCL: after every turn with gold
    calls, and the gold's results must have been produced) or ``final_state`` (tau2: only the
    state the whole conversation leaves, which must equal the gold calls'; and each text of the
    test's ``say`` must appear in the agent's replies) or ``geometry`` (``family:scene3d``: the final
    scene, read back as data, measured against the test's ``scene`` checks; ``dojo.rewards.scene``).

    ``user``: the system prompt of a served user model (tau2's simulated user), for episodes given
    one (``EpisodeRunner(user=...)``); without one, ``turns`` are the user's words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    classes: list[str] = Field(min_length=1, description="Class names of the API, as in modules.")
    modules: dict[str, str] = Field(description="Class name -> the module that defines it.")
    config: dict[str, Any] = Field(default_factory=dict, description="Class name -> its initial state.")
    stateless: list[str] = Field(default_factory=list, description="Classes made without a scenario.")
    long_context: bool = Field(False, description="Load the scenario with the API's long-context filler.")
    turns: list[str] = Field(min_length=1, description="The user's message of each turn.")
    added: dict[int, list[str]] = Field(default_factory=dict, description="Turn -> tools offered from it on.")
    check: Literal["each_turn", "final_state", "geometry"] = Field(
        "each_turn", description="When the state is compared (geometry: the final scene, dojo.rewards.scene)."
    )
    user: str | None = Field(None, description="The brief a served user model plays from (its system prompt).")

    @model_validator(mode="after")
    def _consistent(self) -> ApiScenario:
        for name in self.classes:
            if not name.isidentifier() or name not in self.modules:
                raise ValueError(f"API class {name!r} needs a module (modules: {{class: 'package.module'}})")
        for turn in self.added:
            if not 0 <= turn < len(self.turns):
                raise ValueError(f"tools are added at turn {turn}, but the scenario has {len(self.turns)} turn(s)")
        try:
            json.dumps(self.config)
        except (TypeError, ValueError) as e:
            raise ValueError(f"an API's config must be JSON data: {e}") from e
        return self

    def offered(self, tools: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
        """The tools offered at ``turn``: all but those added at a later turn."""
        later = {name for t, names in self.added.items() if t > turn for name in names}
        return [t for t in tools if t.get("function", {}).get("name") not in later]


class TaskMetadata(BaseModel):
    """Where a task came from and how hard it is. ``difficulty`` runs from 0 (easiest) to 1."""

    model_config = ConfigDict(extra="allow")

    source: str = "user"
    difficulty: float | None = Field(None, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list)


class Task(BaseModel):
    """A verifiable task. Serialises to one JSON object (a JSONL line or a Parquet row)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=512)
    domain: str = Field("code", min_length=1, description="code, math, logic, data, ...")
    form: TaskForm
    prompt: str | list[Message]
    language: str = Field("python", description="Language of candidate code (function/assert forms: python).")
    entry_point: str | None = Field(None, description="Function name (function and assert forms).")
    tests: list[TestCase] = Field(default_factory=list)
    reference: str | None = Field(None, description="A solution known to pass: code, or the answer text.")
    limits: Limits | None = Field(None, description="Per-run limits; the grader's defaults when absent.")
    float_tolerance: float = Field(1e-6, ge=0.0, description="Relative/absolute tolerance for float comparison.")
    answer_match: AnswerMatch = Field(
        "exact", description="answer form: exact, numeric, the source's scorer, or fields (a JSON report)."
    )
    checker: str | None = Field(None, description="stdio form: Python checker program (special judge).")
    workspace: Workspace | None = Field(None, description="repo form: the file tree the candidate edits.")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="tools form: OpenAI tool schemas.")
    api: ApiScenario | None = Field(None, description="tools form: a simulated API the calls run on, over turns.")
    document: DocumentSpec | None = Field(None, description="document form: the document's format (and file).")
    environment: str | None = Field(
        None,
        max_length=100,
        pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}(@[0-9a-f]{16})?$",
        description="The Python environment candidate code runs in ('dojo env build NAME'): NAME or NAME@VERSION.",
    )
    partial_credit: bool = Field(
        True,
        description="False: all or nothing under the default reward mode (the source's own reward multiplies its "
        "parts, as tau2's; or a candidate that does nothing passes one of its checks).",
    )
    metadata: TaskMetadata = Field(default_factory=TaskMetadata)

    @model_validator(mode="after")
    def _form_fields(self) -> Task:
        if self.form in ("function", "assert") and not self.entry_point:
            raise ValueError(f"a {self.form} task needs entry_point (the function's name)")
        if self.form in ("function", "assert") and self.language != "python":
            raise ValueError(f"{self.form} tasks are graded in Python; language must be 'python'")
        if self.form != "answer" and not self.tests:
            raise ValueError(f"a {self.form} task needs at least one test")
        if self.form == "answer" and not self.tests and self.reference is None:
            raise ValueError("an answer task needs a test with the expected answer (or a reference)")
        if self.answer_match == "fields" and not all(
            isinstance(t.expected, dict) and isinstance(t.expected.get("field"), str) for t in self.tests
        ):
            raise ValueError("answer_match 'fields': every test needs expected {'field': NAME, 'value': ...}")
        if self.form == "assert" and any(not t.code for t in self.tests):
            raise ValueError("every test of an assert task needs code defining check(candidate)")
        if self.form == "repo":
            if self.workspace is None:
                raise ValueError("a repo task needs a workspace (the file tree the candidate edits)")
            if any(not t.code for t in self.tests):
                raise ValueError("every test of a repo task needs code: the pytest node id it runs")
            if self.workspace.packages and not self.environment:
                raise ValueError("a repo task whose workspace takes packages needs the environment holding them")
            for t in self.tests:
                if t.canary is not None and (t.guard or (t.code or "").partition("::")[0] not in self.workspace.files):
                    raise ValueError(
                        f"test {t.code!r} has canaries: it must be scored (not a guard) and its file must be "
                        "among the workspace's files (the grader writes the canaries into it)"
                    )
                if t.canary is not None:
                    TestNode.parse(t.code or "")  # (a ValueError that says the form a node id takes)
        elif any(t.canary is not None for t in self.tests):
            raise ValueError("only a repo task's tests have canary sites")
        if self.form == "tools":
            if not self.tools and any(
                not (isinstance(t.expected, dict) and t.expected.get("no_call")) for t in self.tests
            ):
                raise ValueError("a tools task needs tools (OpenAI function schemas), unless no call is its answer")
            if any(not isinstance(t.expected, dict) for t in self.tests):
                raise ValueError("every test of a tools task needs expected: {'calls': [...]} or {'no_call': true}")
            if self.api is not None:
                for t in self.tests:
                    gold = t.expected.get("turns")
                    if not isinstance(gold, list) or len(gold) != len(self.api.turns):
                        raise ValueError(
                            "a tools task with an api needs expected {'turns': [[call, ...], ...]}, one list per turn"
                        )
        elif self.api is not None:
            raise ValueError("only a tools task has an api")
        if self.form == "shell":
            if self.workspace is None:
                raise ValueError("a shell task needs a workspace (the file tree it starts from)")
            if any(not isinstance(t.expected, dict) for t in self.tests):
                raise ValueError(
                    "every test of a shell task needs expected: a check, e.g. {'path': ..., 'sha256': ...}"
                )
        if self.form == "document":
            if self.document is None:
                raise ValueError("a document task needs document: its format (and, for docx/xlsx, the file)")
            if self.document.format in FILE_FORMATS and self.language != "python":
                raise ValueError("a docx/xlsx document is written by a Python script: language must be 'python'")
            for i, t in enumerate(self.tests):
                try:
                    parse_rule(t.expected)
                except ValueError as e:
                    raise ValueError(f"test {i} of a document task must be a rule: {e}") from None
        elif self.document is not None:
            raise ValueError("only a document task has a document")
        if self.form == "analysis":
            if self.language != "python":
                raise ValueError("an analysis task's program is Python; language must be 'python'")
            if not all(isinstance(t.expected, dict) and isinstance(t.expected.get("field"), str) for t in self.tests):
                raise ValueError("every test of an analysis task needs expected: {'field': NAME, 'value': ...}")
        elif self.workspace is not None and self.workspace.binary:
            raise ValueError("only an analysis task's workspace has binary files")
        if self.form == "stdio" and self.checker is None and any(not isinstance(t.expected, str) for t in self.tests):
            raise ValueError("every test of a stdio task needs expected stdout (a string), or the task a checker")
        return self

    @property
    def abstains(self) -> bool:
        """A tools task answered by making no call (none of its tools fits the request)."""
        return self.form == "tools" and any(
            isinstance(t.expected, dict) and t.expected.get("no_call") for t in self.tests
        )

    @property
    def hidden_tests(self) -> list[TestCase]:
        return [t for t in self.tests if not t.visible]

    @property
    def visible_tests(self) -> list[TestCase]:
        return [t for t in self.tests if t.visible]

    @property
    def difficulty(self) -> float | None:
        return self.metadata.difficulty

    def prompt_text(self) -> str:
        """The prompt as one string (chat messages joined), for audits and text-only policies."""
        if isinstance(self.prompt, str):
            return self.prompt
        return "\n\n".join(m.content for m in self.prompt)

    def messages(self) -> list[dict[str, str]]:
        """The prompt as chat messages."""
        if isinstance(self.prompt, str):
            return [{"role": "user", "content": self.prompt}]
        return [m.model_dump() for m in self.prompt]
