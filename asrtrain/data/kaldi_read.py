"""Reading Kaldi scp/ark tables through kaldiio, with its failures said in words.

kaldiio reports a truncated ark as numpy's ``buffer size must be a multiple of element
size`` or ``cannot reshape`` (which one depends on where the file ends), an scp offset
that lands inside an entry as a ``UnicodeDecodeError`` (it reads the bytes as a
token), a wrong binary header as an empty ``AssertionError``, and prints a
``UserWarning`` beside each. A user needs the scp, the utterance, the ark and
offset, and what is probably wrong: that is what :func:`load_entry` says; a truncated
ark is told apart by reading the entry once more and watching for a short read.
"""

from __future__ import annotations

import os
import re
import struct
import warnings
from pathlib import Path
from typing import Any, BinaryIO

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


class _WatchedReads:
    """A binary file whose reads note when one comes back short: the entry being read
    runs past the end of the file."""

    def __init__(self, fh: BinaryIO) -> None:
        self.fh, self.short = fh, False

    def read(self, n: int = -1) -> bytes:
        data = self.fh.read(n)
        if n > 0 and len(data) < n:
            self.short = True
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.fh.seek(offset, whence)

    def tell(self) -> int:
        return self.fh.tell()


_ENTRY = re.compile(r"^(?P<ark>.+):(?P<offset>\d+)(\[[^]]*\])?$")


def truncated_ark(entry: str) -> tuple[str, int] | None:
    """(ark, offset) of ``entry`` (``ark:offset``) when that entry runs past the ark's end.

    Whatever a short read makes kaldiio or numpy say ("buffer size must be a multiple of
    element size", "cannot reshape", struct's "unpack requires a buffer"), reading the entry
    again through a file that watches its reads tells a truncated ark from a corrupt one."""
    from kaldiio.matio import read_kaldi

    m = _ENTRY.match(entry)
    if m is None or not os.path.isfile(m["ark"]):
        return None
    ark, offset = m["ark"], int(m["offset"])
    with open(ark, "rb") as fh:
        fh.seek(offset)
        watch = _WatchedReads(fh)
        try:
            read_kaldi(watch)
        except Exception:  # noqa: BLE001 - the failure is known; only the short read matters
            pass
    return (ark, offset) if watch.short else None


def failure(entry: str | None, exc: BaseException) -> str:
    """What reading ``entry`` (``ark:offset``, None where unknown) failing with ``exc`` means:
    a truncated ark named with its size, else :func:`problem`."""
    cut = truncated_ark(entry) if entry else None
    if cut is not None:
        ark, offset = cut
        return f"{ark} is truncated: the entry at offset {offset} runs past its end ({os.path.getsize(ark)} bytes)"
    return problem(exc)


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


def nth_entry(scp: str | os.PathLike[str], index: int) -> tuple[str, str] | None:
    """(key, ``ark:offset``) of the ``index``-th entry of an scp (0-based), None past its end:
    where a sequential read stopped."""
    from asrtrain.core.textio import read_lines

    lines = [ln.split(maxsplit=1) for ln in read_lines(Path(scp)) if ln.strip()]
    if index >= len(lines) or len(lines[index]) < 2:
        return None
    return lines[index][0], lines[index][1].strip()


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
        raise InputError(f"utterance {key!r}{at}: {failure(entry, exc)}", where) from None
