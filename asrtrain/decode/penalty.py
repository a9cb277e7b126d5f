"""Word insertion penalty: a copy of HCLG with the penalty on every word-output arc.

Kaldi adds the penalty to the graph (LM) cost of each word of a lattice
(``lattice-add-penalty``), so a path costs graph + wip·words + acoustic/lmwt. Our
decoder finds one best path and keeps no lattice, so the penalty has to be in the graph
it searches: every arc with an output label (a word) costs ``wip`` more. The copy is
made on the ConstFst bytes with numpy, one vectorised add over the arcs (the demo's
9.3M-arc HCLG: about 1 s, against 0.3 s to read it), written next to the job's outputs,
loaded by kaldifst and deleted. A VectorFst (some Kaldi graphs) goes through
kaldifst's ConstFst conversion first.
"""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.decode.kaldi_graph import const_layout, fst_type, read_hclg
from asrtrain.lang.fstio import ARC

# OpenFst property bits about weights (kWeighted, kUnweighted, kWeightedCycles,
# kUnweightedCycles): the penalty may change them, so the copy claims none of them
WEIGHT_PROPERTIES = 0x100000000 | 0x200000000 | 0x400000000000 | 0x800000000000


def add_word_penalty(buf: bytearray, wip: float) -> int:
    """Add ``wip`` to the weight of every arc with a non-epsilon output label, in place,
    in the bytes of an unaligned ConstFst; returns how many arcs were changed."""
    layout = const_layout(bytes(buf[:256]))
    arcs = np.frombuffer(buf, dtype=ARC, count=layout.num_arcs, offset=layout.arcs_at)
    words = arcs["ol"] != 0
    weights = arcs["w"]  # a view: the add writes into buf
    weights[words] += np.float32(wip)
    (props,) = struct.unpack_from("<Q", buf, layout.props_at)
    struct.pack_into("<Q", buf, layout.props_at, props & ~WEIGHT_PROPERTIES)
    return int(words.sum())


def const_bytes(path: Path, workdir: Path) -> bytearray:
    """The graph as the bytes of an unaligned ConstFst without symbol tables."""
    path = Path(path)
    if fst_type(path) == "const":
        buf = bytearray(path.read_bytes())
        layout = const_layout(bytes(buf[:256]))
        if layout.flags == 0:
            if layout.arcs_at + layout.num_arcs * ARC.itemsize > len(buf):
                raise InputError("OpenFst cannot read this const FST: truncated or corrupt?",
                                 path)
            return buf
        del buf  # symbol tables or alignment: let OpenFst rewrite it plain
    import kaldifst

    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        kaldifst.StdConstFst(read_hclg(path)).write(f"{tmp}/HCLG.fst")
        return bytearray(Path(f"{tmp}/HCLG.fst").read_bytes())


def penalized_hclg(path: Path, wip: float, workdir: Path) -> Any:
    """HCLG with ``wip`` on every word arc, as a kaldifst FST (the graph itself for 0)."""
    if wip == 0.0:
        return read_hclg(path)
    workdir.mkdir(parents=True, exist_ok=True)
    buf = const_bytes(path, workdir)
    add_word_penalty(buf, wip)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        copy = Path(tmp) / "HCLG.fst"
        copy.write_bytes(buf)
        del buf
        return read_hclg(copy)
