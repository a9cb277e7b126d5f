"""Lattice generation on HCLG: one search per utterance, a word lattice out.

The search and the determinization are C++ in ``csrc/`` (Kaldi's LatticeFasterDecoder and
DeterminizeLatticePruned written over OpenFst's ConstFst arrays), reached through ctypes
(``native.py``). HCLG's ConstFst bytes are handed to it as they are on disk: the states
array is already a CSR index into the arcs array. The search runs at acoustic scale
``acwt`` (the scores are multiplied by it, as Kaldi's decodable does); the lattice it
returns holds unscaled acoustic costs, as Kaldi writes lattices.
"""

from __future__ import annotations

import ctypes
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.decode.grid import DEFAULT_BEAM, DEFAULT_LATTICE_BEAM, DEFAULT_MAX_ACTIVE
from asrtrain.decode.lattice import WordLattice

#: Output states of one determinized lattice before its beam is narrowed (Kaldi bounds
#: the determinizer's memory the same way, ``--max-mem``).
DET_MAX_STATES = 200_000
_ERRORS = {2: "no token survived the beam", 3: "the graph has an epsilon cycle",
           4: "lattice determinization blew up even at a narrow beam"}
NO_SURVIVOR = 2


class SearchFailed(InputError):
    """The search of one utterance kept no token (the caller counts it and goes on)."""

    def __init__(self, utt: str, path: Path) -> None:
        self.reason = _ERRORS[NO_SURVIVOR]
        super().__init__(f"utterance {utt}: {self.reason}", path)


@dataclass
class SearchOptions:
    """Kaldi's LatticeFasterDecoderConfig (min-active as FasterDecoder's default)."""

    beam: float = DEFAULT_BEAM
    max_active: int = DEFAULT_MAX_ACTIVE
    min_active: int = 20
    beam_delta: float = 0.5
    lattice_beam: float = DEFAULT_LATTICE_BEAM
    prune_interval: int = 25
    prune_scale: float = 0.1


@dataclass
class LatticeStats:
    """What one utterance's search and determinization produced."""

    reached_final: bool
    raw_states: int
    raw_arcs: int
    tokens: int
    beam_reductions: int
    search_seconds: float  # CPU, the search and the raw lattice
    determinize_seconds: float  # CPU


class LatticeDecoder:
    """HCLG loaded once; ``decode`` turns a score matrix into a ``WordLattice``."""

    def __init__(self, hclg: Path, opts: SearchOptions, workdir: Path | None = None) -> None:
        from asrtrain.decode.native import load
        from asrtrain.decode.penalty import const_bytes

        self.path = Path(hclg)
        self.lib = load()
        with tempfile.TemporaryDirectory(dir=workdir) as tmp:
            self._buf = np.frombuffer(const_bytes(self.path, Path(tmp)), dtype=np.uint8)
        start, n_states, n_arcs, states_at = _const_header(bytes(self._buf[:256]))
        from asrtrain.lang.fstio import ARC

        arcs = np.frombuffer(self._buf, dtype=ARC, count=n_arcs, offset=states_at + 20 * n_states)
        if n_states == 0 or not 0 <= start < n_states:
            raise InputError("HCLG has no start state", self.path)
        self.max_ilabel = int(arcs["il"].max()) if n_arcs else 0
        addr = self._buf.ctypes.data
        self.opts = opts
        self._handle = self.lib.lg_new(
            addr + states_at, n_states, addr + states_at + 20 * n_states, start, opts.beam,
            opts.max_active, opts.min_active, opts.beam_delta, opts.lattice_beam,
            opts.prune_interval, opts.prune_scale, DET_MAX_STATES)

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            self.lib.lg_free(handle)
            self._handle = None

    def columns(self, num_columns: int, tid2pdf: np.ndarray | None = None) -> np.ndarray:
        """Score column of each input label: pdf+1 → pdf, or a transition-id → its pdf."""
        if tid2pdf is None:
            if self.max_ilabel > num_columns:
                raise InputError(f"HCLG has input label {self.max_ilabel}, the scores only "
                                 f"{num_columns} pdfs", self.path)
            col = np.arange(-1, num_columns, dtype=np.int32)
        else:
            col = np.asarray(tid2pdf, dtype=np.int32)
            if self.max_ilabel >= col.size:
                raise InputError(f"HCLG has input label {self.max_ilabel}, the transition-id map "
                                 f"only {col.size - 1}", self.path)
        return np.ascontiguousarray(col)

    def decode(self, scores: np.ndarray, acwt: float, columns: np.ndarray, utt: str = "?"
               ) -> tuple[WordLattice, LatticeStats]:
        """Search ``scores`` [T, pdfs] (log-likelihoods) at acoustic scale ``acwt``."""
        mat = np.ascontiguousarray(scores, dtype=np.float32)
        if mat.ndim != 2 or int(columns.max()) >= mat.shape[1]:
            raise InputError(f"utterance {utt}: scores of shape {mat.shape} do not cover the "
                             "graph's input labels", self.path)
        stats = np.zeros(10, dtype=np.int64)
        rc = self.lib.lg_decode(self._handle, mat.ctypes.data, mat.shape[0], mat.shape[1],
                                columns.ctypes.data, columns.size, float(acwt), stats.ctypes.data)
        if rc == NO_SURVIVOR:
            raise SearchFailed(utt, self.path)
        if rc != 0:
            raise InputError(f"utterance {utt}: {_ERRORS.get(rc, f'lattice decoder error {rc}')}",
                             self.path)
        return self._copy(stats), LatticeStats(reached_final=bool(stats[0]),
                                               raw_states=int(stats[1]), raw_arcs=int(stats[2]),
                                               tokens=int(stats[3]),
                                               beam_reductions=int(stats[4]),
                                               search_seconds=stats[8] * 1e-6,
                                               determinize_seconds=stats[9] * 1e-6)

    def _copy(self, stats: np.ndarray) -> WordLattice:
        n_states, n_arcs, n_labels = (int(x) for x in stats[5:8])
        n_final = int(self.lib.lg_final_ilabels(self._handle))
        i32, f32 = np.int32, np.float32
        lat = WordLattice(
            src=np.empty(n_arcs, i32), dst=np.empty(n_arcs, i32), word=np.empty(n_arcs, i32),
            graph=np.empty(n_arcs, f32), acoustic=np.empty(n_arcs, f32),
            ilabels=np.empty(n_labels, i32), ilabel_offsets=np.empty(n_arcs + 1, i32),
            final_graph=np.empty(n_states, f32), final_acoustic=np.empty(n_states, f32),
            final_ilabels=np.empty(n_final, i32), final_offsets=np.empty(n_states + 1, i32))
        arrays = (lat.src, lat.dst, lat.word, lat.graph, lat.acoustic, lat.ilabels,
                  lat.ilabel_offsets, lat.final_graph, lat.final_acoustic, lat.final_ilabels,
                  lat.final_offsets)
        self.lib.lg_copy(self._handle, *(ctypes.c_void_p(a.ctypes.data) for a in arrays))
        return lat


def _const_header(head: bytes) -> tuple[int, int, int, int]:
    """(start, states, arcs, byte offset of the states array) of an unaligned ConstFst."""
    at = 4
    for _ in range(2):  # fst type, arc type
        (n,) = struct.unpack_from("<i", head, at)
        at += 4 + n
    _version, _flags, _props, start, n_states, n_arcs = struct.unpack_from("<iiQqqq", head, at)
    return int(start), int(n_states), int(n_arcs), at + 40
