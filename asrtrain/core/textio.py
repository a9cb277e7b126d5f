"""Reading a user's text file: a missing file or bytes that are not UTF-8 are InputErrors naming it.

Lexicons, transcripts, CTMs and symbol tables come from other tools and other
people's corpora; a Latin-1 lexicon is a common mistake and deserves the file
name and the byte, not a ``UnicodeDecodeError`` traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

from asrtrain.core.errors import InputError


def not_utf8(exc: UnicodeDecodeError) -> str:
    """The one-line problem for bytes that do not decode."""
    return f"not UTF-8 text ({exc.reason} at byte {exc.start}); convert it with iconv"


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole file as text; missing or undecodable is an InputError naming the file."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", path) from None
    except UnicodeDecodeError as exc:
        raise InputError(not_utf8(exc), path) from None


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """The file's lines (no line ends), through :func:`read_text`."""
    return read_text(path).splitlines()
