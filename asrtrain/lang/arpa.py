"""ARPA files read as a stream of arrays and written from arrays: any size, plain or gzipped.

A 36M-n-gram ARPA is gigabytes of text; a Python dict of tuples of it is tens of
gigabytes. The reader never holds more than one chunk of lines: it yields each order's
n-grams as integer word ids (the lang dir's ``words.txt``) with their log10 probabilities
and back-off weights, so what stays in memory is the compact form the caller builds.

Vocabulary, as Kaldi's ``arpa2fst --read-symbol-table`` does it: an n-gram with a word
the symbol table lacks is skipped (it cannot be recognized: it has no pronunciation),
and counted; the ARPA's ``<unk>`` is the lang dir's ``<UNK>``. Anything malformed is an
:class:`InputError` naming the file and the line: a broken header, a count that does not
match its section, a line with the wrong fields, a truncated gzip, a file that ends
before ``\\end\\``.
"""

from __future__ import annotations

import gzip
import logging
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import IO

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.textio import decode_block

log = logging.getLogger("asrtrain.lang.arpa")

UNK_SPELLINGS = ("<unk>", "<UNK>")
CHUNK_LINES = 1 << 17
BLOCK_BYTES = 1 << 22
_COUNT = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)$")
_SECTION = re.compile(r"^\\(\d+)-grams:$")


@dataclass
class ArpaChunk:
    """Consecutive n-grams of one order: ids [B, n] int32, log10 p and back-off [B] float32."""

    order: int
    ids: np.ndarray
    logp: np.ndarray
    bow: np.ndarray
    lines: np.ndarray    # the file line of each row (for messages)


@dataclass
class ArpaStats:
    """What the reader saw: declared counts, n-grams kept and skipped, OOV words."""

    declared: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    oov_words: Counter[str] = field(default_factory=Counter)  # word → n-grams skipped for it
    top_order_bows: int = 0   # back-off weights on highest-order n-grams (meaningless, ignored)

    def summary(self) -> dict:
        return {"declared": self.declared, "kept": self.kept, "skipped": self.skipped,
                "oov_words": len(self.oov_words),
                "oov_examples": [w for w, _ in self.oov_words.most_common(10)]}


def open_arpa(path: Path) -> IO[bytes]:
    """The file's bytes, gunzipped when it starts with gzip's magic (whatever its name)."""
    try:
        raw = open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open the ARPA file ({exc.strerror})", path) from None
    if raw.peek(2)[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


class _Lines:
    """The file's lines, decoded a block of bytes at a time (a Python loop per line costs
    more than the parsing); ``lineno`` is the number of the last line handed out."""

    def __init__(self, fh: IO[bytes], path: Path) -> None:
        self.fh, self.path = fh, path
        self.block: list[str] = []
        self.at = 0
        self.lineno = 0
        self.rest = b""
        self.eof = False
        self.offset = 0  # bytes of the (decompressed) file before the next block

    def _fill(self) -> bool:
        """Read the next block; False at the end of the file."""
        if self.eof:
            return False
        try:
            data = self.fh.read(BLOCK_BYTES)
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"line {self.lineno + 1}: the gzip stream is truncated or corrupt "
                             f"here ({exc})", self.path) from None
        if not data:
            self.eof = True
            if not self.rest:
                return False
            data, self.rest = self.rest, b""
        else:
            data, self.rest = self.rest + data, b""
            cut = data.rfind(b"\n")
            if cut < 0:
                self.rest = data
                return self._fill()
            data, self.rest = data[:cut], data[cut + 1:]
        lines_before = self.lineno + (len(self.block) - self.at)  # lines of earlier blocks
        text = decode_block(data, self.path, lines_before, self.offset)
        self.offset += len(data) + 1  # and the line end it was cut at
        self.block, self.at = text.split("\n"), 0
        return True

    def next(self) -> str | None:
        """The next line, stripped; None at the end."""
        while self.at == len(self.block):
            if not self._fill():
                return None
        line = self.block[self.at]
        self.at += 1
        self.lineno += 1
        return line.strip()

    def entries(self, most: int) -> tuple[list[str], bool]:
        """Up to ``most`` lines before the next blank one, and whether the blank line (or
        the end of the file) was reached; the blank line is consumed."""
        while self.at == len(self.block):
            if not self._fill():
                return [], True
        block, start = self.block, self.at
        stop = min(len(block), start + most)
        for i in range(start, stop):
            line = block[i]
            if not line or line.isspace():
                self.at, self.lineno = i + 1, self.lineno + i - start + 1
                return block[start:i], True
        self.at, self.lineno = stop, self.lineno + stop - start
        return block[start:stop], False


class ArpaReader:
    """Stream an ARPA file as :class:`ArpaChunk` s of word ids from ``vocab``.

    ``vocab`` maps a word to its id; the ARPA's ``<unk>`` maps to the id of whichever
    spelling of it ``vocab`` has. Words not in ``vocab`` skip their n-grams (counted in
    :attr:`stats`).
    """

    def __init__(self, path: Path, vocab: dict[str, int], chunk_lines: int = CHUNK_LINES) -> None:
        self.path = Path(path)
        self.vocab = dict(vocab)
        unk = next((vocab[s] for s in UNK_SPELLINGS if s in vocab), None)
        if unk is not None:
            for s in UNK_SPELLINGS:
                self.vocab.setdefault(s, unk)
        self.chunk_lines = chunk_lines
        self.stats = ArpaStats()
        self.lines: _Lines | None = None

    @property
    def lineno(self) -> int:
        return self.lines.lineno if self.lines is not None else 0

    def error(self, message: str, line: int | None = None) -> InputError:
        return InputError(f"line {line or self.lineno}: {message}", self.path)

    def header(self, lines: _Lines) -> list[int]:
        """The ``\\data\\`` counts; leaves ``lines`` after the blank line that ends them."""
        while (line := lines.next()) != "\\data\\":
            if line is None:
                raise self.error("no \\data\\ header: not an ARPA file")
        counts: dict[int, int] = {}
        while (line := lines.next()) is not None:
            if not line:
                if counts:
                    break
                continue
            m = _COUNT.match(line)
            if m is None:
                raise self.error(f"expected 'ngram N=COUNT' in the \\data\\ header, got {line[:60]!r}")
            counts[int(m.group(1))] = int(m.group(2))
        if not counts:
            raise self.error("the \\data\\ header lists no n-gram counts")
        if sorted(counts) != list(range(1, len(counts) + 1)):
            raise self.error(f"the \\data\\ header's orders {sorted(counts)} are not 1..N")
        return [counts[n] for n in range(1, len(counts) + 1)]

    def read(self) -> Iterator[ArpaChunk]:
        """Every order's n-grams, in file order, as chunks of at most ``chunk_lines`` rows."""
        with open_arpa(self.path) as fh:
            lines = self.lines = _Lines(fh, self.path)
            counts = self.header(lines)
            self.stats.declared = counts
            order = len(counts)
            self.stats.kept, self.stats.skipped = [0] * order, [0] * order
            for n in range(1, order + 1):
                self._section_start(lines, n)
                yield from self._section(lines, n, order, counts[n - 1])
            while (line := lines.next()) is not None:
                if line == "\\end\\":
                    return
                if line:
                    raise self.error(f"expected \\end\\ after the {order}-grams, got {line[:60]!r}")
            raise self.error("the file ends before \\end\\ (truncated?)")

    def _section_start(self, lines: _Lines, n: int) -> None:
        while (line := lines.next()) is not None:
            if not line:
                continue
            m = _SECTION.match(line)
            if m is None or int(m.group(1)) != n:
                raise self.error(f"expected the \\{n}-grams: section, got {line[:60]!r}")
            return
        raise self.error(f"the file ends before the \\{n}-grams: section (truncated?)")

    def _section(self, lines: _Lines, n: int, order: int, declared: int) -> Iterator[ArpaChunk]:
        seen = 0
        ended = False
        while not ended:
            start = lines.lineno + 1
            batch, ended = lines.entries(self.chunk_lines)
            if batch:
                seen += len(batch)
                yield from self._chunk(batch, n, order, start)
        if lines.eof and lines.at == len(lines.block):
            raise self.error(f"the file ends inside the \\{n}-grams: section (truncated?)")
        if seen != declared:
            raise self.error(f"the \\{n}-grams: section has {seen} n-grams where the \\data\\ "
                             f"header says {declared}")

    def _chunk(self, batch: list[str], n: int, order: int, start: int) -> Iterator[ArpaChunk]:
        parts = [ln.split() for ln in batch]
        widths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        bad = np.flatnonzero((widths < n + 1) | (widths > n + 2))
        if bad.size:
            k = int(bad[0])
            raise self.error(f"a {n}-gram line needs 'log10p {' '.join(['w'] * n)} [backoff]', "
                             f"got {batch[k][:80]!r}", start + k)
        probs = np.empty(len(parts), dtype=np.float32)
        bows = np.zeros(len(parts), dtype=np.float32)
        ids = np.empty((len(parts), n), dtype=np.int64)
        get = self.vocab.get
        for width in (n + 1, n + 2):
            rows = np.flatnonzero(widths == width)
            if rows.size == 0:
                continue
            group = parts if rows.size == len(parts) else [parts[k] for k in rows.tolist()]
            table = np.array(group, dtype=object).reshape(rows.size, width)
            probs[rows] = self._floats(table[:, 0], start, rows)
            if width == n + 2:
                if n == order:
                    self.stats.top_order_bows += int(rows.size)
                else:
                    bows[rows] = self._floats(table[:, n + 1], start, rows)
            flat = table[:, 1:n + 1].ravel().tolist()
            ids[rows] = np.fromiter(map(get, flat, repeat(-1)), dtype=np.int64,
                                    count=len(flat)).reshape(rows.size, n)
        ok = (ids >= 0).all(axis=1)
        if not ok.all():
            for k in np.flatnonzero(~ok).tolist():
                for w in parts[k][1:n + 1]:
                    if w not in self.vocab:
                        self.stats.oov_words[w] += 1
            self.stats.skipped[n - 1] += int((~ok).sum())
        if ok.any():
            keep = np.flatnonzero(ok)
            self.stats.kept[n - 1] += int(keep.size)
            yield ArpaChunk(order=n, ids=ids[keep].astype(np.int32), logp=probs[keep],
                            bow=bows[keep], lines=(start + keep).astype(np.int64))

    def _floats(self, col: np.ndarray, start: int, rows: np.ndarray) -> np.ndarray:
        try:
            out = col.astype(np.float64)
        except ValueError:
            for k, s in enumerate(col.tolist()):
                try:
                    float(s)
                except ValueError:
                    raise self.error(f"{s!r} is not a number", start + int(rows[k])) from None
            raise
        if not np.isfinite(out).all():
            k = int(np.flatnonzero(~np.isfinite(out))[0])
            raise self.error(f"{col[k]!r} is not a finite number", start + int(rows[k]))
        return out


def format_rows(words: list[list[str]], logp: np.ndarray, bow: np.ndarray | None) -> str:
    """ARPA lines ``log10p<TAB>w1 … wn[<TAB>bow]`` (a back-off of 0 is left out, as SRILM)."""
    probs = [f"{x:.7f}" for x in np.maximum(logp, -99.0).tolist()]
    text = [" ".join(ws) for ws in words]
    if bow is None:
        return "".join(f"{p}\t{t}\n" for p, t in zip(probs, text, strict=True))
    out = []
    for p, t, b in zip(probs, text, bow.tolist(), strict=True):
        out.append(f"{p}\t{t}\t{max(b, -99.0):.7f}\n" if b != 0.0 else f"{p}\t{t}\n")
    return "".join(out)


def log10(p: float) -> float:
    return math.log10(p) if p > 0 else -99.0
