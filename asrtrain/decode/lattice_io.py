"""Kaldi lattice archives: ``WordLattice`` as Kaldi's CompactLattice, text or binary.

An archive entry is ``key`` and a space, then the lattice. Binary (what Kaldi's
decoders write, ``lat.N.gz``): ``\\0B`` and an OpenFst VectorFst of arc type
``compactlattice44`` — per state its final weight and arc count, per arc input label,
output label (both the word), weight, next state; a weight is graph cost and acoustic
cost as float32, then the string length and the transition-ids as int32. Text (what
``lattice-copy ark:... ark,t:-`` prints): a newline, then OpenFst's acceptor text form
with tabs — ``src dst word graph,acoustic,id_id_id`` per arc, ``state graph,acoustic,ids``
per final state (the weight left out where it is One), start state first — and an
empty line. Floats are written with the fewest digits that read back to the same
float32 (Kaldi prints 6 significant digits; its reader takes either). A ``.gz`` path is
gzipped, as Kaldi's recipes keep lattices.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

import numpy as np

from asrtrain.core.atomic import atomic_path
from asrtrain.core.errors import InputError
from asrtrain.decode.lattice import WordLattice

FST_MAGIC = 2125659606
ARC_TYPE = "compactlattice44"
VECTOR_VERSION = 2
# kExpanded | kMutable (a VectorFst's static properties) | kAcceptor: nothing else is
# claimed, OpenFst computes any other property it needs
PROPERTIES = 0x1 | 0x2 | 0x10000


def _open(path: Path, mode: str, gz: bool) -> IO[bytes]:
    if gz:
        return gzip.open(path, mode, compresslevel=6)  # type: ignore[return-value]
    return open(path, mode)  # noqa: SIM115


def write_archive(path: Path, lattices: Iterable[tuple[str, WordLattice]],
                  binary: bool = True) -> int:
    """Write ``(key, lattice)`` entries to ``path`` atomically; returns how many."""
    path = Path(path)
    n = 0
    with atomic_path(path) as tmp:
        with _open(tmp, "wb", path.suffix == ".gz") as fh:
            for key, lat in lattices:
                if not key or any(c.isspace() for c in key):
                    raise InputError(f"lattice key {key!r} is empty or has a space", path)
                fh.write(key.encode() + b" ")
                fh.write(b"\0B" + to_bytes(lat) if binary else to_text(lat).encode())
                n += 1
    return n


def read_archive(path: Path) -> Iterator[tuple[str, WordLattice]]:
    """Every ``(key, lattice)`` of an archive, text or binary entries (plain or .gz)."""
    path = Path(path)
    if not path.exists():
        raise InputError("lattice archive not found", path)
    try:
        with _open(path, "rb", path.suffix == ".gz") as fh:  # both kinds have peek()
            while True:
                key = _read_key(fh, path)
                if key is None:
                    return
                if fh.peek(2)[:2] == b"\0B":  # type: ignore[attr-defined]
                    fh.read(2)
                    lat = read_binary(fh, path, key)
                else:
                    lat = read_text(fh, path, key)
                yield key, lat
    except (EOFError, gzip.BadGzipFile, OSError) as exc:
        raise InputError(f"lattice archive is truncated or corrupt ({exc})", path) from None


def _read_key(fh: IO[bytes], path: Path) -> str | None:
    out = bytearray()
    while True:
        c = fh.read(1)
        if not c:
            if out.strip():
                raise InputError(f"entry {out.decode(errors='replace')!r} has no lattice", path)
            return None
        if c == b" ":
            if out.strip():
                return out.decode(errors="replace").strip()
            continue
        if c in b"\n\r\t" and not out.strip():
            continue
        if c == b"\n":
            raise InputError(f"entry {out.decode(errors='replace')!r}: no space after the key",
                             path)
        out += c


# ---------------------------------------------------------------- text


def _f(x: float) -> str:
    """Fewest digits that read back to the same float32; Kaldi's spelling of infinity."""
    if np.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return str(np.float32(x))


def _weight(g: float, a: float, labels: np.ndarray) -> str:
    return f"{_f(g)},{_f(a)}," + "_".join(str(int(x)) for x in labels)


def to_text(lat: WordLattice) -> str:
    """The lattice as Kaldi's CompactLattice text (newline first, empty line last)."""
    lines = [""]
    for s, arcs in enumerate(_arcs_by_state(lat)):
        for a in arcs:
            head = f"{s}\t{int(lat.dst[a])}\t{int(lat.word[a])}"
            lab = lat.arc_string(a)
            if lat.graph[a] == 0 and lat.acoustic[a] == 0 and lab.size == 0:
                lines.append(head)  # One: OpenFst prints no weight
            else:
                lines.append(f"{head}\t{_weight(lat.graph[a], lat.acoustic[a], lab)}")
        if np.isfinite(lat.final_graph[s]):
            lab = lat.final_string(s)
            if lat.final_graph[s] == 0 and lat.final_acoustic[s] == 0 and lab.size == 0:
                lines.append(str(s))
            else:
                lines.append(f"{s}\t{_weight(lat.final_graph[s], lat.final_acoustic[s], lab)}")
    return "\n".join(lines) + "\n\n"


def _parse_weight(text: str, where: str, path: Path) -> tuple[float, float, list[int]]:
    parts = text.split(",")
    if len(parts) != 3:
        raise InputError(f"{where}: weight {text!r} is not graph,acoustic,ids (a CompactLattice)",
                         path)
    try:
        labels = [int(x) for x in parts[2].split("_")] if parts[2] else []
        return float(parts[0]), float(parts[1]), labels
    except ValueError:
        raise InputError(f"{where}: bad weight {text!r}", path) from None


def read_text(fh: IO[bytes], path: Path, key: str) -> WordLattice:
    """One text entry (after its key): lines up to an empty line."""
    while True:  # the rest of the key's line
        c = fh.read(1)
        if not c:
            raise InputError(f"lattice {key}: truncated", path)
        if c == b"\n":
            break
        if not c.isspace():
            raise InputError(f"lattice {key}: expected a newline after the key", path)
    arcs: list[tuple[int, int, int, float, float, list[int]]] = []
    finals: dict[int, tuple[float, float, list[int]]] = {}
    start, top = -1, -1
    for n, raw in enumerate(iter(fh.readline, b""), 1):
        cols = raw.decode(errors="replace").split()
        if not cols:
            break
        where = f"lattice {key}, line {n}"
        try:
            s = int(cols[0])
            if len(cols) in (3, 4):
                d, w = int(cols[1]), int(cols[2])
            else:
                d, w = s, 0
        except ValueError:
            raise InputError(f"{where}: {raw.decode(errors='replace').strip()!r} is not a "
                             "CompactLattice line (state, next state, word, weight)", path) from None
        if len(cols) > 4:
            raise InputError(f"{where}: {len(cols)} columns: a Lattice, not a CompactLattice "
                             "(write lattices with --write-compact=true)", path)
        if min(s, d, w) < 0:
            raise InputError(f"{where}: negative state or label", path)
        start = s if start < 0 else start
        top = max(top, s, d)
        if len(cols) <= 2:
            finals[s] = _parse_weight(cols[1], where, path) if len(cols) == 2 else (0.0, 0.0, [])
        else:
            g, a, lab = _parse_weight(cols[3], where, path) if len(cols) == 4 else (0.0, 0.0, [])
            arcs.append((s, d, w, g, a, lab))
    else:
        raise InputError(f"lattice {key}: no empty line at its end (truncated?)", path)
    return _build(top + 1, max(start, 0), arcs, finals, key, path)


def _build(num_states: int, start: int, arcs: list, finals: dict, key: str,
           path: Path) -> WordLattice:
    try:
        return WordLattice.from_arcs(num_states, start, arcs, finals)
    except ValueError as exc:
        raise InputError(f"lattice {key}: {exc}", path) from None


# ---------------------------------------------------------------- binary


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<i", len(data)) + data


def _header(arc_type: str, num_states: int, num_arcs: int) -> bytes:
    """OpenFst's FstHeader of a VectorFst (start state 0, none if empty)."""
    return b"".join([struct.pack("<i", FST_MAGIC), _string("vector"), _string(arc_type),
                     struct.pack("<iiQqqq", VECTOR_VERSION, 0, PROPERTIES,
                                 0 if num_states else -1, num_states, num_arcs)])


def _arcs_by_state(lat: WordLattice) -> list[list[int]]:
    order = np.argsort(lat.src, kind="stable")
    starts = np.searchsorted(lat.src[order], np.arange(lat.num_states + 1))
    return [order[starts[s]:starts[s + 1]].tolist() for s in range(lat.num_states)]


def to_bytes(lat: WordLattice) -> bytes:
    """The lattice as OpenFst writes a ``VectorFst<CompactLatticeArc>``."""
    out = [_header(ARC_TYPE, lat.num_states, lat.num_arcs)]
    for s, arcs in enumerate(_arcs_by_state(lat)):
        if np.isfinite(lat.final_graph[s]):
            lab = lat.final_string(s)
            out.append(struct.pack("<ffi", lat.final_graph[s], lat.final_acoustic[s], lab.size))
            out.append(lab.astype("<i4").tobytes())
        else:
            out.append(struct.pack("<ffi", np.inf, np.inf, 0))
        out.append(struct.pack("<q", len(arcs)))
        for a in arcs:
            lab = lat.arc_string(a)
            w = int(lat.word[a])
            out.append(struct.pack("<iiffi", w, w, lat.graph[a], lat.acoustic[a], lab.size))
            out.append(lab.astype("<i4").tobytes())
            out.append(struct.pack("<i", int(lat.dst[a])))
    return b"".join(out)


def to_lattice_bytes(lat: WordLattice) -> bytes:
    """The lattice as Kaldi's ``Lattice`` (``lattice-copy --write-compact=false``), OpenFst
    binary of ``lattice4`` arcs: Kaldi's ConvertLattice, each string a chain of arcs with
    one transition-id each (the word and the weight on the first), chain states numbered
    after the lattice's own, state by state, a final string's chain before the arcs."""
    Arc = tuple[int, int, float, float, int]  # ilabel, olabel, graph, acoustic, next state
    states: list[list[Arc]] = [[] for _ in range(lat.num_states)]
    finals: dict[int, tuple[float, float]] = {}

    def new_state() -> int:
        states.append([])
        return len(states) - 1

    def chain(s: int, labels: list[int], word: int, g: float, a: float, end: int) -> None:
        """Arcs from ``s`` to ``end`` (-1: to a new final state) spelling ``labels``."""
        cur = s
        for n, x in enumerate(labels):
            nxt = end if n == len(labels) - 1 and end >= 0 else new_state()
            first = n == 0
            states[cur].append((x, word if first else 0, g if first else 0.0,
                                a if first else 0.0, nxt))
            cur = nxt
        if end < 0:
            finals[cur] = (g, a) if not labels else (0.0, 0.0)
        elif not labels:
            states[s].append((0, word, g, a, end))

    for s, arcs in enumerate(_arcs_by_state(lat)):
        if np.isfinite(lat.final_graph[s]):
            chain(s, lat.final_string(s).tolist(), 0, float(lat.final_graph[s]),
                  float(lat.final_acoustic[s]), -1)
        for a in arcs:
            chain(s, lat.arc_string(a).tolist(), int(lat.word[a]), float(lat.graph[a]),
                  float(lat.acoustic[a]), int(lat.dst[a]))
    out = [_header("lattice4", len(states), sum(len(x) for x in states))]
    for s, arcs2 in enumerate(states):
        out.append(struct.pack("<ff", *finals.get(s, (np.inf, np.inf))))
        out.append(struct.pack("<q", len(arcs2)))
        out.extend(struct.pack("<iiffi", *arc) for arc in arcs2)
    return b"".join(out)


def _take(fh: IO[bytes], fmt: str) -> tuple:
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise EOFError("unexpected end of file")
    return struct.unpack(fmt, data)


def _take_string(fh: IO[bytes]) -> str:
    (n,) = _take(fh, "<i")
    if not 0 <= n < 256:
        raise EOFError(f"bad string length {n}")
    return fh.read(n).decode(errors="replace")


def _take_weight(fh: IO[bytes]) -> tuple[float, float, list[int]]:
    g, a, n = _take(fh, "<ffi")
    if n < 0:
        raise EOFError("negative string length")
    return g, a, list(_take(fh, f"<{n}i")) if n else []


def read_binary(fh: IO[bytes], path: Path, key: str) -> WordLattice:
    """One binary entry (after ``\\0B``): an OpenFst VectorFst of CompactLattice arcs."""
    (magic,) = _take(fh, "<i")
    fst_type, arc_type = _take_string(fh), _take_string(fh)
    if magic != FST_MAGIC:
        raise InputError(f"lattice {key}: not an OpenFst FST (bad magic number)", path)
    if fst_type != "vector" or arc_type != ARC_TYPE:
        raise InputError(f"lattice {key}: a {fst_type} FST of {arc_type} arcs; expected a vector "
                         f"FST of {ARC_TYPE} (Kaldi's CompactLattice)", path)
    _version, flags, _props, start, num_states, _num_arcs = _take(fh, "<iiQqqq")
    if flags & 0x3:
        raise InputError(f"lattice {key}: has symbol tables (Kaldi never writes them)", path)
    if num_states < 0:
        raise InputError(f"lattice {key}: state count not in the header", path)
    arcs: list[tuple[int, int, int, float, float, list[int]]] = []
    finals: dict[int, tuple[float, float, list[int]]] = {}
    for s in range(num_states):
        g, a, lab = _take_weight(fh)
        if np.isfinite(g) or np.isfinite(a):
            finals[s] = (g, a, lab)
        (narcs,) = _take(fh, "<q")
        for _ in range(narcs):
            il, ol = _take(fh, "<ii")
            g, a, lab = _take_weight(fh)
            (d,) = _take(fh, "<i")
            if il != ol:
                raise InputError(f"lattice {key}: arc labels {il}:{ol} differ (not an acceptor)",
                                 path)
            if not 0 <= d < num_states:
                raise InputError(f"lattice {key}: arc to state {d} of {num_states}", path)
            arcs.append((s, d, il, g, a, lab))
    if num_states == 0 or start < 0:
        return WordLattice.from_arcs(0, 0, [], {})
    return _build(num_states, int(start), arcs, finals, key, path)
