"""Reading a text file: UTF-8, or the encoding the user named; anything else is an InputError.

Lexicons, transcripts, CTMs, GLMs and symbol tables come from other tools and other
people's corpora; a Latin-1 lexicon is a common mistake. Bytes that do not decode
must never be indexed, scored or compared as garbage, and deserve the file, the line
and the byte, not a ``UnicodeDecodeError`` traceback. Every text file asrtrain reads
goes through :func:`read_text` (or :func:`read_lines`), so the rule lives here:

* a file is UTF-8 (a leading byte-order mark is dropped);
* where it is not, and the user named an encoding (``asrtrain --encoding latin-1 …``,
  i.e. ``ASRTRAIN_ENCODING``), the whole file is read in that encoding, and the log
  says so; asrtrain's own outputs stay UTF-8, so they read the same either way;
* else one line: ``FILE: line N: not UTF-8 (byte 0xE9 at byte offset B) …``.

The choice travels in the environment, so spawned workers (decoding, alignment jobs)
read as the command does.
"""

from __future__ import annotations

import codecs
import io
import logging
import os
from pathlib import Path

from asrtrain.core.errors import ConfigError, InputError

#: Where the user's encoding for text that is not UTF-8 lives (``asrtrain --encoding`` sets it).
ENCODING_ENV = "ASRTRAIN_ENCODING"
_BOM = codecs.BOM_UTF8
log = logging.getLogger("asrtrain.textio")


def check_encoding(name: str) -> str:
    """``name`` if Python can decode with it (its canonical name), else a ConfigError."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise ConfigError(f"unknown text encoding {name!r} (e.g. latin-1, cp1252, utf-16)") from None


def set_user_encoding(name: str | None) -> None:
    """Read text that is not UTF-8 in ``name`` from now on, here and in workers started later."""
    if name:
        os.environ[ENCODING_ENV] = check_encoding(name)
    else:
        os.environ.pop(ENCODING_ENV, None)


def user_encoding() -> str | None:
    """The encoding the user named for text that is not UTF-8, or None (UTF-8 only)."""
    name = os.environ.get(ENCODING_ENV, "").strip()
    return check_encoding(name) if name else None


def not_utf8(data: bytes, exc: UnicodeDecodeError, base: int = 0, lines_before: int = 0,
             offset_before: int = 0) -> str:
    """The one-line problem for ``data`` that does not decode: its line, byte and offset (``data`` may be
    a block of a file that starts after ``lines_before`` lines and ``offset_before`` bytes)."""
    at = base + exc.start
    line = lines_before + data.count(b"\n", 0, at) + 1
    return (f"line {line}: not UTF-8 text (byte 0x{data[at]:02X} at byte offset {offset_before + at}: "
            f"{exc.reason}); convert it (iconv -f LATIN1 -t UTF-8) or name its encoding "
            f"(asrtrain --encoding latin-1 …)")


def decode(data: bytes, path: str | os.PathLike[str]) -> str:
    """``data`` (the bytes of ``path``) as text, by the rule of this module."""
    base = len(_BOM) if data.startswith(_BOM) else 0
    try:
        return data[base:].decode("utf-8")
    except UnicodeDecodeError as exc:
        encoding = user_encoding()
        if encoding is None:
            raise InputError(not_utf8(data, exc, base), path) from None
        first = exc
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"line {line}: neither UTF-8 nor {encoding} (byte 0x{data[exc.start]:02X} at byte "
                         f"offset {exc.start}: {exc.reason})", path) from None
    line = data.count(b"\n", 0, base + first.start) + 1
    log.info("%s: not UTF-8 (line %d), read as %s", os.fspath(path), line, encoding)
    return text


def decode_block(data: bytes, path: str | os.PathLike[str], lines_before: int = 0, offset_before: int = 0) -> str:
    """Whole lines of a file read a block at a time (a streamed ARPA of gigabytes), by the rule of
    :func:`decode` applied to the block; the user's encoding must keep a line end one byte
    (Latin-1, cp1252: not UTF-16)."""
    base = len(_BOM) if offset_before == 0 and data.startswith(_BOM) else 0
    try:
        return data[base:].decode("utf-8")
    except UnicodeDecodeError as exc:
        encoding = user_encoding()
        if encoding is None:
            raise InputError(not_utf8(data, exc, base, lines_before, offset_before), path) from None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = lines_before + data.count(b"\n", 0, exc.start) + 1
        raise InputError(f"line {line}: neither UTF-8 nor {encoding} (byte 0x{data[exc.start]:02X} at byte "
                         f"offset {offset_before + exc.start}: {exc.reason})", path) from None


def read_text(path: str | os.PathLike[str]) -> str:
    """The whole file as text (line ends as ``\\n``); missing or undecodable is an InputError naming it."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a text file", path) from None
    return _universal_newlines(decode(data, path))


def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """The file's lines (no line ends), through :func:`read_text`; line ``n`` is ``[n - 1]``."""
    text = read_text(path)
    lines = text.split("\n")
    return lines[:-1] if text.endswith("\n") or not text else lines


def text_stream(path: str | os.PathLike[str]) -> io.StringIO:
    """The file's text as a file object, for a library that reads an open file (kaldiio's scp)."""
    return io.StringIO(read_text(path))


def _universal_newlines(text: str) -> str:
    """``\\r\\n`` and ``\\r`` as ``\\n``, as Python's text mode reads them."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text
