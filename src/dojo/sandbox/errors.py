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
