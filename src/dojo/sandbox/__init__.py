"""Isolated execution of untrusted, model-written code.

from dojo.sandbox import AsyncSandbox, Program
async with AsyncSandbox() as sandbox:
    result = await sandbox.run(Program(language="python", source="print(1)"))
    assert result.verdict == "Accepted" and result.stdout == "1\\n"
"""

from dojo.sandbox.backend import SandboxAPI, SessionAPI
from dojo.sandbox.errors import (
    IsolationUnavailable,
    LanguageUnavailable,
    SandboxError,
    UnknownLanguage,
)
from dojo.sandbox.languages import LANGUAGES, available_languages, get_language
from dojo.sandbox.limits import DEFAULT_COMPILE_LIMITS, DEFAULT_LIMITS, Limits
from dojo.sandbox.program import InputFile, Program
from dojo.sandbox.result import ExecutionResult, FetchedFile, StepResult
from dojo.sandbox.runtime import AsyncSandbox, Sandbox, mask_modules, preflight
from dojo.sandbox.verdict import LimitKind, Verdict

__all__ = [
    "DEFAULT_COMPILE_LIMITS",
    "DEFAULT_LIMITS",
    "LANGUAGES",
    "AsyncSandbox",
    "ExecutionResult",
    "FetchedFile",
    "InputFile",
    "IsolationUnavailable",
    "LanguageUnavailable",
    "LimitKind",
    "Limits",
    "Program",
    "Sandbox",
    "SandboxAPI",
    "SandboxError",
    "SessionAPI",
    "StepResult",
    "UnknownLanguage",
    "Verdict",
    "available_languages",
    "get_language",
    "mask_modules",
    "preflight",
]
