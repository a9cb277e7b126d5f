"""Expected failures: the one exception type the CLI turns into a one-line error.

Library code raises :class:`AsrtrainError` for anything a user can fix (a missing
file, a malformed line, a dimension that does not match). The CLI prints
``Error: <message>`` and exits with the error's ``exit_code`` (1; 75 for a preempted
run that should be requeued), with the traceback only under ``-v``. Anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations

import os


class AsrtrainError(Exception):
    """A failure caused by the input or the environment, reported in one line."""

    exit_code = 1

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        super().__init__(f"{self.path}: {message}" if self.path else message)


class InputError(AsrtrainError):
    """Bad input data: a file that is missing, malformed or inconsistent."""


class ConfigError(AsrtrainError):
    """A configuration file or option combination that cannot be used."""


class Preempted(AsrtrainError):
    """Training stopped on SIGTERM/SIGUSR1 after a checkpoint: run the same command again to go on.

    Its exit status (75, EX_TEMPFAIL: "try again later") is what the cluster job
    scripts requeue on.
    """

    exit_code = 75


def one_line(exc: BaseException) -> str:
    """The message of an exception on one line (multi-line messages are joined)."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(part.strip() for part in text.splitlines() if part.strip())
