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

import re

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


# How OpenAI-compatible servers word a refusal of a request that does not fit the model's context:
# vLLM ("maximum context length", its engine's "longer than the maximum model length"), SGLang
# ("longer than the model's context length"), OpenAI ("context_length_exceeded"), TGI's 422
# ("inputs tokens + max_new_tokens").
CONTEXT_FULL = re.compile(r"context[ _]length|context window|maximum model length|max_new_tokens", re.IGNORECASE)


def refused_for_length(status: int, text: str) -> bool:
    """Whether a server's answer (``status``, and its error's code and message in ``text``) refuses a
    request for its length: the request's content, not the server's failure (a policy's
    conversation, a judge's judged text)."""
    return status == 413 or (status in (400, 422) and CONTEXT_FULL.search(text) is not None)
