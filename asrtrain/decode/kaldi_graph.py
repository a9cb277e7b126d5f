"""Kaldi decoding graphs (``utils/mkgraph.sh``): transition-id input labels and the tid→pdf map.

Kaldi's HCLG reads transition-ids (1-based), not pdf+1. ``--tid2pdf FILE`` (lines
``transition-id pdf-id [phone [hmm-state]]``, from ``show-transitions phones.txt
final.mdl``) turns the scorer's pdf matrix into one column per transition-id with a
single gather, so kaldi-decoder's rule "input label k reads column k−1" holds unchanged.
A Kaldi graph directory has HCLG.fst (ConstFst or VectorFst), words.txt, phones.txt,
``num_pdfs`` and ``phones/{word_boundary,align_lexicon}.int``; it has no tree of ours.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines

WORD_BOUNDARY_KINDS = ("nonword", "begin", "end", "internal", "singleton")


@dataclass
class TidMap:
    """``pdf[k]``: the pdf of transition-id k (``pdf[0]`` unused, -1); per-tid phone/state."""

    pdf: np.ndarray
    phone_state: list[tuple[int, int]] | None
    path: Path

    @property
    def num_tids(self) -> int:
        return int(self.pdf.size - 1)

    def columns(self) -> np.ndarray:
        """Column k−1 of the expanded matrix holds pdf(k)."""
        return self.pdf[1:]


def read_tid2pdf(path: Path, phones: dict[str, int] | None = None) -> TidMap:
    """Read ``tid pdf [phone [hmm-state]]`` lines; transition-ids must run 1..N."""
    path = Path(path)
    if not path.exists():
        raise InputError("transition-id map not found", path)
    tids: list[int] = []
    pdfs: list[int] = []
    extra: list[tuple[int, int]] = []
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) not in (2, 3, 4) or not all(p.isdigit() for p in parts[:2]):
            raise InputError(f"line {n}: expected 'transition-id pdf-id [phone [hmm-state]]', "
                             f"got {line!r}", path)
        tids.append(int(parts[0]))
        pdfs.append(int(parts[1]))
        if len(parts) >= 3:
            extra.append((_phone_id(parts[2], phones, path, n),
                          int(parts[3]) if len(parts) == 4 and parts[3].isdigit() else 0))
    if not tids:
        raise InputError("transition-id map is empty", path)
    order = np.argsort(np.asarray(tids), kind="stable")
    sorted_tids = np.asarray(tids)[order]
    expect = np.arange(1, len(tids) + 1)
    if sorted_tids[0] < 1:
        raise InputError(f"transition-id {int(sorted_tids[0])}: transition-ids start at 1", path)
    if not np.array_equal(sorted_tids, expect):
        bad = int(np.flatnonzero(sorted_tids != expect)[0])
        raise InputError(f"transition-ids must run 1..{len(tids)} without gaps or repeats; "
                         f"transition-id {bad + 1} is {'repeated' if bad and sorted_tids[bad] == sorted_tids[bad - 1] else 'missing'}",
                         path)
    pdf = np.concatenate(([-1], np.asarray(pdfs, dtype=np.int64)[order]))
    phone_state = None
    if extra:
        if len(extra) != len(tids):
            raise InputError("some lines have a phone column and others not", path)
        phone_state = [extra[i] for i in order]
    return TidMap(pdf=pdf, phone_state=phone_state, path=path)


def _phone_id(token: str, phones: dict[str, int] | None, path: Path, line: int) -> int:
    if phones is not None and token in phones:
        return phones[token]
    if token.isdigit():
        return int(token)
    raise InputError(f"line {line}: phone {token!r} is not in the graph's phones.txt", path)


def check_tid2pdf(tmap: TidMap, num_outputs: int, graph_max_ilabel: int | None = None) -> None:
    """Every pdf below the model's outputs; every graph input label has a transition-id."""
    pdfs = tmap.columns()
    if int(pdfs.max()) >= num_outputs:
        k = int(np.argmax(pdfs >= num_outputs)) + 1
        raise InputError(f"transition-id {k} maps to pdf {int(pdfs[k - 1])}, but the model has "
                         f"{num_outputs} outputs (pdfs 0..{num_outputs - 1}): map and model "
                         "come from different trees", tmap.path)
    if graph_max_ilabel is not None and graph_max_ilabel > tmap.num_tids:
        raise InputError(f"the graph has input label {graph_max_ilabel}, the map only "
                         f"{tmap.num_tids} transition-ids", tmap.path)


def expand(scores: np.ndarray, tmap: TidMap) -> np.ndarray:
    """One gather: pdf columns → transition-id columns (column k−1 = pdf(k))."""
    return np.ascontiguousarray(np.take(scores, tmap.columns(), axis=1))


def fst_type(path: Path) -> str:
    """``const`` or ``vector``, from the OpenFst header."""
    with open(path, "rb") as fh:
        head = fh.read(64)
    if len(head) < 8:
        raise InputError("not an OpenFst file (too short)", path)
    (n,) = struct.unpack_from("<i", head, 4)
    if not 0 < n < 32 or len(head) < 8 + n:
        raise InputError("not an OpenFst file (bad header)", path)
    return head[8:8 + n].decode(errors="replace")


def read_hclg(path: Path):
    """HCLG as kaldifst StdConstFst or StdVectorFst, whichever Kaldi wrote."""
    import kaldifst

    kind = fst_type(path)
    readers = {"const": kaldifst.StdConstFst, "vector": kaldifst.StdVectorFst}
    if kind not in readers:
        raise InputError(f"unsupported FST type {kind!r} (expected const or vector)", path)
    fst = readers[kind].read(str(path))  # OpenFst prints its reason and returns None
    if fst is None:
        raise InputError(f"OpenFst cannot read this {kind} FST: truncated or corrupt?", path)
    return fst


@dataclass
class ConstLayout:
    """Where a ConstFst file keeps its properties, states and arcs (OpenFst's header)."""

    flags: int
    props_at: int
    num_states: int
    num_arcs: int
    arcs_at: int


def const_layout(head: bytes) -> ConstLayout:
    """Parse the header at the start of a ConstFst file (``fst_type`` already checked)."""
    from asrtrain.lang.fstio import STATE

    at = 4
    for _ in range(2):  # fst type, arc type
        (n,) = struct.unpack_from("<i", head, at)
        at += 4 + n
    _version, flags, _props, _start, n_states, n_arcs = struct.unpack_from("<iiQqqq", head, at)
    return ConstLayout(flags=flags, props_at=at + 8, num_states=n_states, num_arcs=n_arcs,
                       arcs_at=at + 40 + n_states * STATE.itemsize)


def max_ilabel(path: Path) -> int | None:
    """The largest input label of a ConstFst file (memory-mapped, no copy); None for a
    VectorFst, whose variable-length states cannot be read without walking them."""
    from asrtrain.lang.fstio import ARC

    if fst_type(path) != "const":
        return None
    with open(path, "rb") as fh:
        layout = const_layout(fh.read(256))
    if layout.flags or layout.num_arcs == 0:  # symbol tables/alignment padding: not parsed
        return None
    arcs = np.memmap(path, dtype=ARC, mode="r", offset=layout.arcs_at, shape=(layout.num_arcs,))
    return int(arcs["il"].max())


def read_word_boundary(path: Path) -> dict[int, str]:
    """``phone-id kind`` per line (kind: nonword, begin, end, internal, singleton)."""
    table: dict[int, str] = {}
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[0].isdigit() or parts[1] not in WORD_BOUNDARY_KINDS:
            raise InputError(f"line {n}: expected 'phone-id {'|'.join(WORD_BOUNDARY_KINDS)}', "
                             f"got {line!r}", path)
        table[int(parts[0])] = parts[1]
    return table


def read_align_lexicon_int(path: Path, words: dict[int, str]) -> dict[str, list[tuple[int, ...]]]:
    """Kaldi's ``word-id word-id phone-id …`` lines → word → pronunciations (``<eps>`` left out)."""
    prons: dict[str, list[tuple[int, ...]]] = {}
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 3 or not all(p.isdigit() for p in parts) or parts[0] != parts[1]:
            raise InputError(f"line {n}: expected 'word-id word-id phone-id ...', got {line!r}",
                             path)
        wid = int(parts[0])
        if wid == 0:
            continue
        if wid not in words:
            raise InputError(f"line {n}: word id {wid} is not in words.txt", path)
        prons.setdefault(words[wid], []).append(tuple(int(p) for p in parts[2:]))
    return prons
