"""Errors of the sandbox runtime. A user program's failure is a verdict, never one of these."""

from __future__ import annotations

from dojo.errors import DojoError, InputError


class SandboxError(DojoError):
    """The sandbox itself failed (slot died, protocol broken, set-up failed): not the program's fault.

    A result with ``Verdict.SANDBOX_ERROR`` carries the same reason; ``raise_for_sandbox_error()``
    turns it into this exception. Rewards must never score it as 0: retry or drop the sample.
    """


class IsolationUnavailable(SandboxError):
    """This machine cannot provide the isolation dojo requires; the message says what is missing."""


class LanguageUnavailable(InputError):
    """The language is known but its toolchain is not installed; the message says what to install."""


class UnknownLanguage(InputError):
    """The language name is not one dojo knows."""


class SessionBusy(DojoError):
    """A session is serving another request (it takes one at a time): retry once that one has ended.

    Not an ``InputError``: the same request succeeds once the session is free. The HTTP service
    answers it with 409 Conflict."""


class FileRefused(InputError):
    """A session's file was not written: what its own code left at the path (a FIFO, a symlink, a
    socket, a directory) is not a regular file, or not a directory where one was needed. The session
    and its other files are untouched; remove or rename that entry (in an exec) and write again."""
