"""Append-only files that a kill can tear: read back, and appended to again, as a journal is.

``metrics.jsonl`` and the logs that runs append to grow a line at a time. A job killed
in the middle of a write (SIGKILL, a node lost, a full disk) leaves the last line cut
short: no line end, and for JSON lines no closing brace. The rerun must go on, not
refuse to resume, and must not lose the rows before the tear:

* a reader takes every complete line and drops a torn last line, with a warning that
  says how many bytes went (a last line that lacks only its line end is complete and
  kept);
* a writer that appends to a log again first ends the torn line (:func:`end_torn_line`),
  so the next line starts on its own instead of gluing onto the fragment; a JSON-lines
  file is rewritten from the rows read (``MetricsLog`` on resume), so its fragment goes;
* a malformed line that is *not* the last is no tear (something else wrote it): an
  error naming the file and the line.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.core.textio import decode

log = logging.getLogger("asrtrain.journal")


def split_torn(data: bytes) -> tuple[bytes, bytes]:
    """``data`` as (its complete lines, the bytes after its last line end)."""
    cut = data.rfind(b"\n") + 1
    return data[:cut], data[cut:]


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a JSON-lines file; a torn last row is dropped with a warning, a bad row before it
    is an InputError naming its line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", path) from None
    body, tail = split_torn(data)
    lines = decode(body, path).split("\n")[:-1] if body else []
    rows = [_row(line, number, path) for number, line in enumerate(lines, 1) if line.strip()]
    if tail.strip():
        try:
            rows.append(_row(decode(tail, path), len(lines) + 1, path))  # complete but for its line end
        except InputError:
            log.warning("%s: line %d was cut off by a killed run (%d bytes): dropped, the %d rows before it "
                        "kept", path, len(lines) + 1, len(tail), len(rows))
    return rows


def _row(line: str, number: int, path: Path) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(f"line {number}: not JSON ({exc.msg})", path) from None
    if not isinstance(row, dict):
        raise InputError(f"line {number}: not a JSON object", path)
    return row


def end_torn_line(path: str | os.PathLike[str]) -> bool:
    """Before appending to ``path``: end a torn last line (a line end after it); True if there was one.

    The fragment stays, so a reader of a log sees what the killed run was writing; a
    JSON-lines reader drops it (:func:`read_jsonl`).
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, os.SEEK_END) == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            if fh.read(1) == b"\n":
                return False
    except FileNotFoundError:
        return False
    with open(path, "ab") as fh:
        fh.write(b"\n")
    log.warning("%s: its last line was cut off by a killed run; appending after it", path)
    return True


def open_append(path: str | os.PathLike[str]) -> Any:
    """``open(path, "a")`` for a log (text), after :func:`end_torn_line`."""
    end_torn_line(path)
    return open(path, "a", encoding="utf-8")
