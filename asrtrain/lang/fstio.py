"""FSTs as numpy arrays through OpenFst's binary ConstFst layout.

kaldifst lacks relabelling and Kaldi's self-loop insertion, and a text round trip of a
graph with millions of arcs costs minutes and gigabytes in Python. A ConstFst file is a
header, an array of 20-byte states (final weight, first arc, arcs, input and output
epsilons) and an array of 16-byte arcs (ilabel, olabel, weight, nextstate): numpy reads
and writes it without a Python loop, and kaldifst loads it as ``StdConstFst``.

The arrays keep the file's types (int32 labels and states, float32 weights: 20 bytes an
arc), read through a memory map; OpenFst's freed heap is handed back to the system
(``core.malloc.release_memory``) before they are made, so a LibriSpeech-size HCLG (35M arcs) peaks
at the size of its largest FST step, not that plus the heap of the step before it.
"""

from __future__ import annotations

import os
import struct
import tempfile
from dataclasses import dataclass

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.malloc import release_memory

MAGIC = 2125659606
STATE = np.dtype([("final", "<f4"), ("pos", "<u4"), ("narcs", "<u4"), ("nieps", "<u4"),
                  ("noeps", "<u4")])
ARC = np.dtype([("il", "<i4"), ("ol", "<i4"), ("w", "<f4"), ("dst", "<i4")])
EXPANDED = 0x1  # the only property we assert; OpenFst computes the others when asked
HEADER_MAX = 4096  # the header: magic, two short strings, six numbers


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
    with open(path, "rb") as fh:
        buf = fh.read(HEADER_MAX)
    (magic,) = struct.unpack_from("<i", buf, 0)
    fst_type, at = _string(buf, 4)
    arc_type, at = _string(buf, at)
    if magic != MAGIC or fst_type != "const" or arc_type != "standard":
        raise InputError(f"not a standard ConstFst ({fst_type}/{arc_type})", path)
    _version, flags, _props, start, n_states, n_arcs = struct.unpack_from("<iiQqqq", buf, at)
    at += 4 + 4 + 8 + 8 + 8 + 8
    if flags:
        raise InputError("ConstFst with symbol tables or alignment is not supported", path)
    body = np.memmap(path, dtype=np.uint8, mode="r")
    states = np.frombuffer(body, dtype=STATE, count=n_states, offset=at)
    arcs = np.frombuffer(body, dtype=ARC, count=n_arcs, offset=at + n_states * STATE.itemsize)
    src = np.repeat(np.arange(n_states, dtype=np.int32), states["narcs"])
    final = np.array(states["final"])
    fin = np.flatnonzero(np.isfinite(final))
    out = Arcs(src=src, dst=np.array(arcs["dst"]), il=np.array(arcs["il"]),
               ol=np.array(arcs["ol"]), w=np.array(arcs["w"]),
               finals=dict(zip(fin.tolist(), final[fin].astype(np.float64).tolist(), strict=True)),
               start=int(start), num_states=int(n_states))
    del states, arcs, body
    return out


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
        const = kaldifst.StdConstFst(fst)
        const.write(f"{tmp}/f.fst")
        del const
        release_memory()
        return read_const(f"{tmp}/f.fst")


def to_vector_fst(arcs: Arcs):
    """Arrays as a kaldifst StdVectorFst (through a temporary ConstFst file)."""
    import kaldifst

    with tempfile.TemporaryDirectory() as tmp:
        write_const(arcs, f"{tmp}/f.fst")
        return kaldifst.StdVectorFst(kaldifst.StdConstFst.read(f"{tmp}/f.fst"))
