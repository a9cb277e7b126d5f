"""FSTs as numpy arrays through OpenFst's binary ConstFst layout.

kaldifst lacks relabelling and Kaldi's self-loop insertion, and a text round trip of a
graph with millions of arcs costs minutes and gigabytes in Python. A ConstFst file is a
header, an array of 20-byte states (final weight, first arc, arcs, input and output
epsilons) and an array of 16-byte arcs (ilabel, olabel, weight, nextstate): numpy reads
and writes it without a Python loop, and kaldifst loads it as ``StdConstFst``.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError

MAGIC = 2125659606
STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"), ("nieps", "<u4"),
                  ("noeps", "<u4")])
ARC = np.dtype([("il", "<i4"), ("ol", "<i4"), ("w", "<f4"), ("dst", "<i4")])
EXPANDED = 0x1  # the only property we assert; OpenFst computes the others when asked


@dataclass
class Arcs:
    """An FST as arrays; ``finals`` maps state → final weight."""

    src: np.ndarray
    dst: np.ndarray
    il: np.ndarray
    ol: np.ndarray
    w: np.ndarray
    finals: dict[int, float]
    start: int
    num_states: int


def _string(buf: bytes, at: int) -> tuple[str, int]:
    (n,) = struct.unpack_from("<i", buf, at)
    return buf[at + 4:at + 4 + n].decode(), at + 4 + n


def read_const(path: str | os.PathLike[str]) -> Arcs:
    """Read a ConstFst file written by OpenFst (unaligned, no symbol tables)."""
    buf = Path(path).read_bytes()
    (magic,) = struct.unpack_from("<i", buf, 0)
    fst_type, at = _string(buf, 4)
    arc_type, at = _string(buf, at)
    if magic != MAGIC or fst_type != "const" or arc_type != "standard":
        raise InputError(f"not a standard ConstFst ({fst_type}/{arc_type})", path)
    _version, flags, _props, start, n_states, n_arcs = struct.unpack_from("<iiQqqq", buf, at)
    at += 4 + 4 + 8 + 8 + 8 + 8
    if flags:
        raise InputError("ConstFst with symbol tables or alignment is not supported", path)
    states = np.frombuffer(buf, dtype=STATE, count=n_states, offset=at)
    arcs = np.frombuffer(buf, dtype=ARC, count=n_arcs, offset=at + n_states * STATE.itemsize)
    src = np.repeat(np.arange(n_states, dtype=np.int64), states["narcs"].astype(np.int64))
    fin = np.flatnonzero(np.isfinite(states["final"]))
    return Arcs(src=src, dst=arcs["dst"].astype(np.int64), il=arcs["il"].astype(np.int64),
                ol=arcs["ol"].astype(np.int64), w=arcs["w"].astype(np.float64),
                finals={int(s): float(states["final"][s]) for s in fin}, start=int(start),
                num_states=int(n_states))


def write_const(arcs: Arcs, path: str | os.PathLike[str]) -> None:
    """Write arrays as a ConstFst, arcs sorted by (state, ilabel)."""
    n = int(arcs.num_states)
    order = np.lexsort((arcs.il, arcs.src))
    src = arcs.src[order]
    out = np.empty(src.size, dtype=ARC)
    out["il"], out["ol"] = arcs.il[order], arcs.ol[order]
    out["w"], out["dst"] = arcs.w[order], arcs.dst[order]
    states = np.zeros(n, dtype=STATE)
    states["final"] = np.inf
    for s, fw in arcs.finals.items():
        states["final"][s] = fw
    narcs = np.bincount(src, minlength=n)
    states["narcs"] = narcs
    states["pos"] = np.concatenate(([0], np.cumsum(narcs)[:-1])) if n else []
    states["nieps"] = np.bincount(src[out["il"] == 0], minlength=n)
    states["noeps"] = np.bincount(src[out["ol"] == 0], minlength=n)
    header = struct.pack("<i", MAGIC)
    for name in ("const", "standard"):
        header += struct.pack("<i", len(name)) + name.encode()
    header += struct.pack("<iiQqqq", 2, 0, EXPANDED, int(arcs.start), n, int(src.size))
    with open(path, "wb") as fh:
        fh.write(header)
        fh.write(states.tobytes())
        fh.write(out.tobytes())


def to_arcs(fst) -> Arcs:  # fst: any kaldifst StdFst
    """A kaldifst FST as arrays (through a temporary ConstFst file)."""
    import kaldifst

    with tempfile.TemporaryDirectory() as tmp:
        kaldifst.StdConstFst(fst).write(f"{tmp}/f.fst")
        return read_const(f"{tmp}/f.fst")


def to_vector_fst(arcs: Arcs):
    """Arrays as a kaldifst StdVectorFst (through a temporary ConstFst file)."""
    import kaldifst

    with tempfile.TemporaryDirectory() as tmp:
        write_const(arcs, f"{tmp}/f.fst")
        return kaldifst.StdVectorFst(kaldifst.StdConstFst.read(f"{tmp}/f.fst"))
