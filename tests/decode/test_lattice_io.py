"""Kaldi lattice archives (``decode/lattice_io.py``): round trips, Kaldi's text form as its
tools print it, the binary layout read back by OpenFst (kaldifst), bad archives."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from hand_lattices import random_lattice

from asrtrain.core.errors import InputError
from asrtrain.decode.lattice import WordLattice
from asrtrain.decode.lattice_io import read_archive, to_lattice_bytes, to_text, write_archive

FIELDS = list(WordLattice.__dataclass_fields__)


def _lattices(n: int = 4) -> list[tuple[str, WordLattice]]:
    rng = np.random.default_rng(3)
    out = [(f"utt{i}", random_lattice(rng, states=6 + i, extra_arcs=8)) for i in range(n)]
    for _, lat in out:  # Kaldi's final acoustic cost where not final: anything; ours 0
        lat.final_acoustic[~np.isfinite(lat.final_graph)] = 0.0
    empty = WordLattice.from_arcs(0, 0, [], {})
    return out + [("empty", empty)]


def _canonical(lat: WordLattice) -> WordLattice:
    """The same lattice numbered as the reader numbers states (arcs by source state)."""
    arcs = [(int(lat.src[a]), int(lat.dst[a]), int(lat.word[a]), float(lat.graph[a]),
             float(lat.acoustic[a]), lat.arc_string(a).tolist()) for a in range(lat.num_arcs)]
    arcs.sort(key=lambda x: x[0])
    finals = {s: (float(lat.final_graph[s]), float(lat.final_acoustic[s]),
                  lat.final_string(s).tolist())
              for s in range(lat.num_states) if np.isfinite(lat.final_graph[s])}
    return WordLattice.from_arcs(lat.num_states, 0, arcs, finals)


def _same(a: WordLattice, b: WordLattice) -> None:
    a, b = _canonical(a), b
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype and np.array_equal(x, y), f


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("name", ["lat.0.gz", "lat.ark"])
def test_round_trip(tmp_path, binary, name):
    lats = _lattices()
    assert write_archive(tmp_path / name, lats, binary=binary) == len(lats)
    back = list(read_archive(tmp_path / name))
    assert [k for k, _ in back] == [k for k, _ in lats]
    for (_, a), (_, b) in zip(lats, back, strict=True):
        _same(a, b)
    if name.endswith(".gz"):
        assert gzip.open(tmp_path / name).read(5) == b"utt0 "


def test_kaldi_text_form():
    """Arcs ``src dst word graph,acoustic,ids`` with tabs, a final state alone when its
    weight is One, newline after the key and an empty line after the lattice."""
    arcs = [(0, 1, 7, 1.5, 20.25, [3, 3, 4]), (0, 2, 0, 0.0, 0.0, []), (1, 2, 9, 0.5, 8.0, [5])]
    lat = WordLattice.from_arcs(3, 0, arcs, {2: (0.0, 0.0, []), 1: (2.0, 4.0, [6, 6])})
    assert to_text(lat) == ("\n0\t1\t7\t1.5,20.25,3_3_4\n0\t2\t0\n1\t2\t9\t0.5,8.0,5\n"
                            "1\t2.0,4.0,6_6\n2\n\n")


def test_reads_kaldis_printed_text(tmp_path):
    """A lattice as ``lattice-copy ark:- ark,t:-`` prints it (6 digits, an unnumbered
    topology, CRLF-free lines, a final weight with a string), start state first."""
    text = ("utt7 \n5\t2\t31\t4.81347,1023.55,2_2_4_4_4\n5\t3\t32\t6.1,1100.2,2_2_4_4\n"
            "2\t9\t0\t0,12.5,6\n3\t9\t33\t1,3,6_8\n9\t0.5,7.25,10_10\n\n")
    (tmp_path / "a.ark").write_text(text)
    [(key, lat)] = list(read_archive(tmp_path / "a.ark"))
    assert key == "utt7" and lat.num_states == 4 and lat.num_arcs == 4
    lat.check()
    best = lat.best_path(10.0)
    assert best is not None and best.words == [31]
    assert lat.num_frames == 8 and lat.state_times().tolist() == [0, 5, 4, 6]


def test_openfst_reads_the_binary_layout(tmp_path):
    """kaldifst's OpenFst reads the Lattice form (Kaldi's ConvertLattice of ours): the
    header, VectorFst state/arc layout and LatticeWeight encoding it shares with the
    CompactLattice form are OpenFst's."""
    import kaldifst

    _, lat = _lattices(1)[0]
    (tmp_path / "l.fst").write_bytes(to_lattice_bytes(lat))
    fst = kaldifst.Lattice.read(str(tmp_path / "l.fst"))
    lines = [ln.split() for ln in fst.to_str().splitlines()]
    arcs = [p for p in lines if len(p) >= 4]
    finals = [p for p in lines if len(p) <= 2]
    lengths = np.diff(lat.ilabel_offsets)
    assert fst.start == 0 and len(arcs) == int(np.maximum(lengths, 1).sum()
                                                + np.diff(lat.final_offsets).sum())
    assert sorted(int(p[2]) for p in arcs if int(p[2])) == sorted(
        lat.ilabels.tolist() + lat.final_ilabels.tolist())
    assert sorted(int(p[3]) for p in arcs if int(p[3])) == sorted(lat.word[lat.word > 0].tolist())
    weights = [p[4] for p in arcs if len(p) == 5] + [p[1] for p in finals if len(p) == 2]
    graph = sum(float(w.split(",")[0]) for w in weights)
    fin = np.isfinite(lat.final_graph)
    assert graph == pytest.approx(float(lat.graph.sum() + lat.final_graph[fin].sum()), rel=1e-5)
    assert len(finals) == int(fin.sum())


def test_bad_archives_are_one_line_errors(tmp_path):
    good = tmp_path / "lat.ark"
    write_archive(good, _lattices(2), binary=True)
    data = good.read_bytes()
    cases = {
        "truncated": data[: len(data) // 2],
        "lattice form": b"u1 \n0\t1\t3\t5\t1,2\n1\n\n",
        "no end": b"u1 \n0\t1\t3\t1,2,4\n1\n",
        "bad weight": b"u1 \n0\t1\t3\tx,2,4\n1\n\n",
        "cycle": b"u1 \n0\t1\t3\t1,2,4\n1\t0\t3\t1,2,4\n1\n\n",
        "other arc type": data.replace(b"compactlattice44", b"compactlattice88"),
    }
    for what, content in cases.items():
        path = tmp_path / f"{what.replace(' ', '_')}.ark"
        path.write_bytes(content)
        with pytest.raises(InputError) as err:
            list(read_archive(path))
        assert str(path) in str(err.value) and "\n" not in str(err.value), what
    with pytest.raises(InputError, match="not found"):
        list(read_archive(tmp_path / "missing.ark"))
