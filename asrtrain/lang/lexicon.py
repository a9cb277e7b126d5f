"""The lexicon: a Kaldi dict directory, symbol tables, and the transducers L and L_disambig.

Homophones and pronunciations that are a prefix of another make L∘G non-determinizable
(the same phone string would have to produce two word strings), so, like Kaldi's
``add_lex_disambig.pl``, such pronunciations get a trailing ``#n`` phone. ``#0`` is
reserved for the LM's back-off arcs and passes through L as a self-loop.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines

EPS = "<eps>"
UNK = "<UNK>"
BOS = "<s>"
EOS = "</s>"
SIL_PROB = 0.5


@dataclass
class Lexicon:
    """Word pronunciations (in file order) over a phone inventory with integer ids."""

    prons: list[tuple[str, tuple[str, ...]]]
    phones: dict[str, int]               # real phones incl. sil, ids as in the corpus
    silence: str = "sil"
    disambig: list[tuple[str, tuple[str, ...], str | None]] = field(default_factory=list)
    num_disambig: int = 0                # #1..#num_disambig are used by pronunciations

    @property
    def words(self) -> list[str]:
        """Distinct words in sorted order (the word symbol table's body)."""
        return sorted({w for w, _ in self.prons})


def read_symbols(path: Path) -> dict[str, int]:
    """A Kaldi symbol table ``symbol id`` per line."""
    table: dict[str, int] = {}
    for n, line in enumerate(_lines(path), 1):
        parts = line.split()
        if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
            raise InputError(f"line {n}: expected 'symbol id', got {line!r}", path)
        table[parts[0]] = int(parts[1])
    return table


def write_symbols(path: Path, table: dict[str, int]) -> None:
    """Write a symbol table sorted by id, atomically."""
    from asrtrain.core.atomic import write_text

    write_text(path, "".join(f"{s} {i}\n" for s, i in sorted(table.items(), key=lambda x: x[1])))


def _lines(path: Path) -> list[str]:
    return [ln for ln in read_lines(path) if ln.strip()]


def _numbered(path: Path) -> list[tuple[int, str]]:
    """Non-empty lines with their line numbers in the file (for messages)."""
    return [(n, ln) for n, ln in enumerate(read_lines(path), 1) if ln.strip()]


def read_dict_dir(dict_dir: Path, phones_txt: Path | None = None) -> Lexicon:
    """Read ``lexicon.txt``, the phone lists and the optional silence of a dict dir.

    Phone ids come from ``phones_txt`` (the corpus' table, so alignments keep their
    ids); without it, ``<eps>`` 0, silence 1 and the non-silence phones in file order.
    """
    dict_dir = Path(dict_dir)
    sil = [ln.split()[0] for ln in _lines(dict_dir / "silence_phones.txt")]
    nonsil = [p for ln in _lines(dict_dir / "nonsilence_phones.txt") for p in ln.split()]
    opt = dict_dir / "optional_silence.txt"
    silence = _lines(opt)[0].split()[0] if opt.exists() else sil[0]
    if phones_txt is not None:
        phones = {p: i for p, i in read_symbols(phones_txt).items() if p != EPS and not p.startswith("#")}
        missing = [p for p in sil + nonsil if p not in phones]
        if missing:
            raise InputError(f"phones {missing[:5]} of {dict_dir} are not in the phone table", phones_txt)
    else:
        phones = {p: i for i, p in enumerate(dict.fromkeys(sil + nonsil), start=1)}
    path = dict_dir / "lexicon.txt"
    prons: list[tuple[str, tuple[str, ...]]] = []
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    for n, line in _numbered(path):
        parts = line.split()
        word, pron = parts[0], tuple(parts[1:])
        if not pron:
            raise InputError(f"line {n}: word {word!r} has no pronunciation", path)
        bad = [p for p in pron if p not in phones]
        if bad:
            raise InputError(f"line {n}: word {word!r} uses unknown phone {bad[0]!r}", path)
        if word in (EPS, BOS, EOS) or word.startswith("#"):
            raise InputError(f"line {n}: {word!r} is a reserved symbol", path)
        if (word, pron) in seen:
            entry = " ".join((word, *pron))
            raise InputError(f"line {n}: {entry!r} repeats line {seen[(word, pron)]} "
                             "(duplicate pronunciation)", path)
        seen[(word, pron)] = n
        prons.append((word, pron))
    if not prons:
        raise InputError("no pronunciations", path)
    lex = Lexicon(prons=prons, phones=phones, silence=silence)
    add_disambig(lex)
    return lex


def add_disambig(lex: Lexicon) -> None:
    """Give homophones and prefix pronunciations distinct ``#n`` (Kaldi's rule)."""
    count = Counter(p for _, p in lex.prons)
    prefixes = {p[:i] for _, p in lex.prons for i in range(1, len(p))}
    last: dict[tuple[str, ...], int] = defaultdict(int)
    out: list[tuple[str, tuple[str, ...], str | None]] = []
    for word, pron in lex.prons:
        sym = None
        if count[pron] > 1 or pron in prefixes:
            last[pron] += 1
            sym = f"#{last[pron]}"
        out.append((word, pron, sym))
    lex.disambig = out
    lex.num_disambig = max(last.values(), default=0)


def phone_table(lex: Lexicon) -> dict[str, int]:
    """phones.txt: ``<eps>``, the phones with their ids, then ``#0`` … ``#K``."""
    table = {EPS: 0, **lex.phones}
    top = max(table.values())
    for k in range(lex.num_disambig + 1):
        table[f"#{k}"] = top + 1 + k
    return table


def word_table(lex: Lexicon) -> dict[str, int]:
    """words.txt: ``<eps>`` 0, the words, ``<UNK>``, then ``#0``, ``<s>``, ``</s>``."""
    words = [w for w in lex.words if w != UNK]
    table = {EPS: 0}
    for w in words + [UNK, "#0", BOS, EOS]:
        table[w] = len(table)
    return table


def lexicon_fst_text(lex: Lexicon, disambig: bool, sil_prob: float = SIL_PROB) -> str:
    """Kaldi's ``make_lexicon_fst.py`` with optional silence between words, as text."""
    ph, wd = phone_table(lex), word_table(lex)
    sil_cost, nosil_cost = -math.log(sil_prob), -math.log(1.0 - sil_prob)
    start, loop, sil_state, nxt = 0, 1, 2, 3
    lines = [f"{start} {loop} 0 0 {nosil_cost:.6f}", f"{start} {sil_state} 0 0 {sil_cost:.6f}",
             f"{sil_state} {loop} {ph[lex.silence]} 0"]
    for word, pron, sym in lex.disambig:
        seq = [ph[p] for p in pron] + ([ph[sym]] if disambig and sym else [])
        cur = loop
        for i, p in enumerate(seq[:-1]):
            lines.append(f"{cur} {nxt} {p} {wd[word] if i == 0 else 0}")
            cur, nxt = nxt, nxt + 1
        w = wd[word] if len(seq) == 1 else 0
        lines.append(f"{cur} {loop} {seq[-1]} {w} {nosil_cost:.6f}")
        lines.append(f"{cur} {sil_state} {seq[-1]} {w} {sil_cost:.6f}")
    if disambig:
        lines.append(f"{loop} {loop} {ph['#0']} {wd['#0']}")
    lines.append(f"{loop}")
    return "\n".join(lines) + "\n"


def lexicon_fst(lex: Lexicon, disambig: bool):  # -> kaldifst.StdVectorFst
    """L (for alignment) or L_disambig (for the graph), olabel-sorted for composition."""
    import kaldifst

    fst = kaldifst.compile(lexicon_fst_text(lex, disambig))
    kaldifst.arcsort(fst, sort_type="olabel")
    return fst


def align_lexicon_text(lex: Lexicon) -> str:
    """``WORD p1 p2 …`` per pronunciation: what the CTM writer splits the phone path with."""
    return "".join(f"{w} {' '.join(p)}\n" for w, p in lex.prons)
