"""The root of every error dojo raises on purpose.

- ``DojoError``: catch it to catch dojo's own errors (and nothing of a library's or of Python's);
- ``InputError``: the caller's input is wrong (a bad config, task file, language, limit, request);
  the message says what and how to fix it. It is a ``ValueError`` too, so code that caught
  ``ValueError`` before keeps working. The HTTP service answers it with 400; any other error is
  the service's own and answers 500.

Where each one lives: ``dojo.sandbox.errors`` (``SandboxError``: the sandbox failed, never the
program; ``IsolationUnavailable``, ``SlotDied``, ``UnknownLanguage``, ``LanguageUnavailable``),
``dojo.tasks.files.TaskFileError``, ``dojo.rewards.harness.InvalidTask``, ``dojo.agent.policy``
(``PolicyError`` and its ``RequestRefused``; ``ContextFull``, an input error), ``dojo.service``
(``Overloaded``, ``SessionLimitReached``, ``UnsafeBind``), ``dojo.client.ServiceError``,
``dojo.integrations.verl_data.RewardUnavailable``, ``dojo.train`` (``ConfigError``, ``RunDirError``).
"""

from __future__ import annotations

from pydantic import ValidationError


class DojoError(Exception):
    """An error dojo raises on purpose."""


class InputError(DojoError, ValueError):
    """The caller's input is wrong; the message says what was wrong and how to fix it."""


def field_problems(error: ValidationError, whole: str = "") -> list[str]:
    """pydantic's problems with some input as ``field.path: message``, in its order (a problem of
    the input as a whole under ``whole``): the one spelling of them for every message dojo writes
    (pydantic's own text adds the input's value, its error type and a link to each)."""
    problems = []
    for err in error.errors():
        where = ".".join(str(x) for x in err["loc"]) or whole
        message = err["msg"].removeprefix("Value error, ")
        problems.append(f"{where}: {message}" if where else message)
    return problems
