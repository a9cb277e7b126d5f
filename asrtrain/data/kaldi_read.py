"""Reading Kaldi scp/ark tables through kaldiio, with its failures said in words.

kaldiio reports a truncated ark as ``ValueError: cannot reshape``, an scp offset
that lands inside an entry as a ``UnicodeDecodeError`` (it reads the bytes as a
token), a wrong binary header as an empty ``AssertionError``, and prints a
``UserWarning`` beside each. A user needs the scp, the utterance, the ark and
offset, and what is probably wrong: that is what :func:`load_entry` says.
"""

from __future__ import annotations

import os
import struct
import warnings
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError

# kaldiio prints "An error happend when loading …" before raising; load_entry says it better.
warnings.filterwarnings("ignore", message="An error happend when loading", category=UserWarning,
                        module=r"kaldiio\.")


def open_scp(path: str | os.PathLike[str], what: str = "scp file", max_cache_fd: int = 0) -> Any:
    """kaldiio's lazy table over ``path``; a missing or malformed scp is an InputError."""
    import kaldiio

    from asrtrain.core.textio import text_stream

    if not Path(path).is_file():
        raise InputError(f"{what} not found", path)
    try:  # the scp's text through asrtrain's reader: undecodable bytes name the line and the byte
        return kaldiio.load_scp(text_stream(path), max_cache_fd=max_cache_fd)
    except ValueError as exc:
        raise InputError(f"not a valid scp file ({type(exc).__name__}: {exc})", path) from None


def problem(exc: BaseException) -> str:
    """What a kaldiio exception most likely means."""
    text = str(exc)
    if isinstance(exc, ValueError) and "reshape" in text:
        return f"the ark ends inside this entry: truncated? ({text})"
    if isinstance(exc, UnicodeDecodeError):
        return "the offset does not point at the start of an entry: wrong scp offset?"
    if isinstance(exc, (AssertionError, struct.error, EOFError)):
        return "no Kaldi matrix or vector at this offset: wrong offset or corrupt ark"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def entry_of(table: Any, key: str) -> str | None:
    """The ``ark:offset`` an scp gives for ``key`` (None where kaldiio does not say)."""
    entries = getattr(table, "_dict", None)
    return entries.get(key) if isinstance(entries, dict) else None


def load_entry(table: Any, key: str, where: str | os.PathLike[str]) -> Any:
    """``table[key]``; a failure is an InputError naming ``where``, the utterance and its ark."""
    try:
        return table[key]
    except KeyError:
        raise InputError(f"no entry for utterance {key!r}", where) from None
    except FileNotFoundError as exc:
        raise InputError(f"utterance {key!r}: {exc.filename or 'its ark'} not found", where) from None
    except Exception as exc:  # kaldiio raises many kinds on bad data: say them in words
        entry = entry_of(table, key)
        at = f" ({entry})" if entry else ""
        raise InputError(f"utterance {key!r}{at}: {problem(exc)}", where) from None
