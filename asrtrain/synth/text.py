"""Public-domain text from Debian packages, cleaned into speakable sentences.

Three sources, all in Debian main: the World English Bible (``sword-text-web``, a
SWORD zText module: zlib blocks indexed by ``.bzs`` and ``.bzv``), the fortune
files (``fortunes``, ``fortunes-min``: ``%``-separated plain text) and Ambrose
Bierce's Devil's Dictionary (``dict-devil``, a dictd database). They are fetched
with ``apt-get download`` and unpacked with ``dpkg -x`` into a cache, once and
atomically, so no system install is needed and a killed download leaves nothing
that looks complete.

A sentence is kept when it is ASCII after quote normalisation, has no digit and
no symbol that would be spoken as a word, and has 4 to 30 words; duplicates (by
their upper-case words) are dropped. What each filter dropped is counted.
"""

from __future__ import annotations

import fcntl
import gzip
import json
import logging
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.atomic import atomic_path, write_text
from asrtrain.core.errors import AsrtrainError

log = logging.getLogger("asrtrain.synth.text")

#: Source name -> Debian packages that hold it.
SOURCES: dict[str, tuple[str, ...]] = {
    "bible": ("sword-text-web",),
    "fortunes": ("fortunes", "fortunes-min"),
    "devil": ("dict-devil",),
}
MIN_WORDS, MAX_WORDS = 4, 30
#: Bump when cleaning changes, so cached sentence lists are rebuilt.
CLEANING_VERSION = 3

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"',
                         "\u2014": " -- ", "\u2013": " -- ", "\u00a0": " ", "_": " "})
_WORD = re.compile(r"^[A-Za-z]+(?:'[A-Za-z]+)*$")
#: Characters a sentence may hold: anything else (digits, @, #, /, *, ...) rejects it.
_ALLOWED = re.compile(r"^[A-Za-z ,;:.?!'\"()\-]*$")
_PAUSE = re.compile(r"[,;:()]|--")
_SENTENCE = re.compile(r"\S.*?[.!?]+[\"')]*(?=\s|$)|\S.*$")


def cache_dir() -> Path:
    """``$ASRTRAIN_CACHE`` or ``~/.cache/asrtrain``."""
    env = os.environ.get("ASRTRAIN_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "asrtrain"


@dataclass(frozen=True)
class Sentence:
    """A cleaned sentence: upper-case words (the transcript) and the text to speak.

    The spoken text is the same words in lower case, with a comma where the
    source had a pause mark, so espeak pauses naturally and says nothing else.
    """

    words: tuple[str, ...]
    spoken: str
    source: str


@dataclass
class CleanStats:
    """How many candidate sentences each filter dropped, per source."""

    kept: Counter = field(default_factory=Counter)
    dropped: Counter = field(default_factory=Counter)

    def summary(self) -> str:
        kept = ", ".join(f"{k} {v}" for k, v in sorted(self.kept.items()))
        dropped = ", ".join(f"{k} {v}" for k, v in sorted(self.dropped.items()))
        return f"kept {sum(self.kept.values())} ({kept}); dropped: {dropped or 'none'}"


def fetch_packages(source: str, cache: Path | None = None) -> Path:
    """The unpacked tree of a source's packages, downloading it on first use.

    The tree appears under its final name only after every package is unpacked.
    """
    root = (cache or cache_dir()) / "debian" / source
    if root.is_dir():
        return root
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        raise AsrtrainError(f"cannot fetch text source {source!r}: apt-get and dpkg are needed "
                            f"(Debian/Ubuntu), or place the unpacked packages in {root}")
    root.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(root) as tmp:
        debs = tmp / "debs"
        debs.mkdir(parents=True)
        _run(["apt-get", "download", *SOURCES[source]], debs, source)
        for deb in sorted(debs.glob("*.deb")):
            _run(["dpkg", "-x", str(deb), str(tmp / "tree")], tmp, source)
        shutil.rmtree(debs)
    return root


def _run(cmd: list[str], cwd: Path, source: str) -> None:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.startswith("E:")]
        detail = lines[0] if lines else result.stderr.strip().splitlines()[-1:]
        raise AsrtrainError(f"fetching text source {source!r} failed: `{' '.join(cmd)}` "
                            f"exited {result.returncode}: {detail}")


# --- raw paragraphs from each source -------------------------------------------------------

def bible_paragraphs(tree: Path) -> Iterator[str]:
    """The World English Bible, one book at a time (verses joined), markup removed."""
    modules = sorted((tree / "tree/usr/share/sword/modules/texts/ztext").glob("*"))
    if not modules:
        raise AsrtrainError("no zText module found", tree)
    for testament in ("ot", "nt"):
        yield from _ztext_books(modules[0], testament)


def _ztext_books(module: Path, testament: str) -> Iterator[str]:
    """Read a SWORD zText testament: .bzs = (offset, size, raw size) per zlib block,
    .bzv = (block, start, length) per verse."""
    bzs = (module / f"{testament}.bzs").read_bytes()
    bzv = (module / f"{testament}.bzv").read_bytes()
    bzz = (module / f"{testament}.bzz").read_bytes()
    blocks = [struct.unpack_from("<III", bzs, i) for i in range(0, len(bzs) - 11, 12)]
    cache: dict[int, bytes] = {}
    current_block, verses = -1, []  # type: int, list[str]
    for i in range(0, len(bzv) - 9, 10):
        block, start, length = struct.unpack_from("<IIH", bzv, i)
        if length == 0 or block >= len(blocks):
            continue
        if block != current_block:
            if verses:
                yield " ".join(" ".join(verses).split())
            verses, current_block = [], block
            cache.clear()
        if block not in cache:
            offset, size, _raw = blocks[block]
            cache[block] = zlib.decompress(bzz[offset:offset + size])
        verses.append(_strip_osis(cache[block][start:start + length].decode("utf-8")))
    if verses:
        yield " ".join(" ".join(verses).split())


_OSIS_DROP = re.compile(r"<(note|title)\b[^>]*>.*?</\1>", re.S)
_TAG = re.compile(r"<[^>]*>")


def _strip_osis(text: str) -> str:
    return _TAG.sub("", _OSIS_DROP.sub(" ", text))


def fortune_paragraphs(tree: Path) -> Iterator[str]:
    """Each fortune (files in name order, ascii-art left out), attributions dropped."""
    files = sorted(p for p in (tree / "tree/usr/share/games/fortunes").glob("*")
                   if p.is_file() and p.suffix == "" and p.name != "ascii-art")
    if not files:
        raise AsrtrainError("no fortune files found", tree)
    for path in files:
        text = path.read_text(encoding="latin-1")
        for fortune in re.split(r"^%\s*$", text, flags=re.M):
            lines = [ln.strip() for ln in fortune.splitlines()
                     if ln.strip() and not ln.strip().startswith("--")]
            yield " ".join(lines)


def devil_paragraphs(tree: Path) -> Iterator[str]:
    """Each Devil's Dictionary entry, its headword (``WORD, n.``) removed."""
    share = tree / "tree/usr/share/dictd"
    data = gzip.open(share / "devil.dict.dz").read()
    for line in (share / "devil.index").read_text(encoding="utf-8").splitlines():
        word, offset, length = line.split("\t")
        if word.startswith("00database"):
            continue
        start, size = _b64(offset), _b64(length)
        body = data[start:start + size].decode("utf-8", "replace")
        yield re.sub(r"^[^a-z]*?,\s*[a-z. &]+?\.\s+", "", body.strip()).replace("\n", " ")


def _b64(text: str) -> int:
    """dictd's base-64 numbers, most significant digit first."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    value = 0
    for char in text:
        value = value * 64 + alphabet.index(char)
    return value


PARAGRAPHS = {"bible": bible_paragraphs, "fortunes": fortune_paragraphs,
              "devil": devil_paragraphs}


# --- cleaning --------------------------------------------------------------------------------

def split_sentences(paragraph: str) -> list[str]:
    """Split on sentence-final punctuation followed by space."""
    text = " ".join(paragraph.translate(_QUOTES).split())
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def clean_sentence(raw: str, source: str = "") -> tuple[Sentence | None, str]:
    """A sentence, or None and the reason it was dropped."""
    raw = raw.translate(_QUOTES)
    if any(ch.isdigit() for ch in raw):
        return None, "digits"
    if not raw.isascii():
        return None, "non-ascii"
    if not _ALLOWED.match(raw):
        return None, "symbols"
    words: list[str] = []
    spoken: list[str] = []
    for chunk in re.split(r"(\s+|--|-)", raw):
        if not chunk.strip() or chunk in ("-", "--"):
            if chunk == "--" and spoken and not spoken[-1].endswith(","):
                spoken[-1] += ","
            continue
        pause = bool(_PAUSE.search(chunk.rstrip(".!?\"'")[-1:] or ""))
        token = chunk.strip(" ,;:.?!\"'()")
        if not token:
            continue
        if not _WORD.match(token):
            return None, "tokens"
        words.append(token.upper())
        spoken.append(token.lower() + ("," if pause else ""))
    if not MIN_WORDS <= len(words) <= MAX_WORDS:
        return None, "length"
    end = raw.rstrip("\"')")[-1:]
    end = end if end in (".", "?", "!") else "."
    return Sentence(tuple(words), " ".join(spoken).rstrip(",") + end, source), ""


def clean(paragraphs: Iterable[str], source: str, stats: CleanStats,
          seen: set[tuple[str, ...]]) -> list[Sentence]:
    """Cleaned, de-duplicated sentences of one source (``seen`` spans sources)."""
    out: list[Sentence] = []
    for paragraph in paragraphs:
        for raw in split_sentences(paragraph):
            sentence, reason = clean_sentence(raw, source)
            if sentence is None:
                stats.dropped[reason] += 1
            elif sentence.words in seen:
                stats.dropped["duplicate"] += 1
            else:
                seen.add(sentence.words)
                stats.kept[source] += 1
                out.append(sentence)
    return out


def load_sentences(sources: Iterable[str] = tuple(SOURCES), cache: Path | None = None
                   ) -> tuple[list[Sentence], CleanStats]:
    """All cleaned sentences of the sources, in a fixed order, and what cleaning dropped.

    Each source is cleaned once into the cache (a TSV of spoken text and words,
    and the counts of what each filter dropped, written before the TSV so the TSV
    marks a complete entry).
    """
    cache = cache or cache_dir()
    stats, seen, sentences = CleanStats(), set(), []
    for source in sources:
        if source not in SOURCES:
            raise AsrtrainError(f"unknown text source {source!r} (choose from "
                                f"{', '.join(SOURCES)})")
        cached = cache / "text" / f"{source}.v{CLEANING_VERSION}.tsv"
        counts = cached.with_suffix(".dropped.json")
        if not cached.is_file() or not counts.is_file():
            _prepare_source(source, cache, cached, counts)
        stats.dropped.update(json.loads(counts.read_text(encoding="utf-8")))
        for line in cached.read_text(encoding="utf-8").splitlines():
            spoken, words = line.split("\t")
            key = tuple(words.split())
            if key in seen:
                stats.dropped["duplicate across sources"] += 1
                continue
            seen.add(key)
            stats.kept[source] += 1
            sentences.append(Sentence(key, spoken, source))
    return sentences, stats


def _prepare_source(source: str, cache: Path, cached: Path, counts: Path) -> None:
    """Fetch and clean one source into the cache, one process at a time (a file lock)."""
    cached.parent.mkdir(parents=True, exist_ok=True)
    with open(cached.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cached.is_file() and counts.is_file():
            return  # another process made it while we waited
        part_stats = CleanStats()
        part = clean(PARAGRAPHS[source](fetch_packages(source, cache)), source, part_stats, set())
        write_text(counts, json.dumps(dict(part_stats.dropped), sort_keys=True) + "\n")
        write_text(cached, "".join(f"{s.spoken}\t{' '.join(s.words)}\n" for s in part))
        log.info("text source %s: %s", source, part_stats.summary())
