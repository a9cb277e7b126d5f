"""The graph's arrays in ConstFst's own types (int32, float32): the same HCLG, byte for byte,
as the int64/float64 arrays it was built with before (issue 38: 9.1 → ~5 GB at 200k words)."""

from __future__ import annotations

import numpy as np

from asrtrain.core.malloc import release_memory
from asrtrain.lang.fstio import Arcs, read_const, write_const
from asrtrain.lang.graph import add_self_loops


def wide_self_loops(arcs: Arcs, self_loop: np.ndarray, scale: float) -> Arcs:
    """``add_self_loops`` as it was on int64/float64 arrays (commit 8522c5a): the reference."""
    n = arcs.num_states
    width = int(max(arcs.il.max(initial=0), 0)) + 1
    keys = np.concatenate([arcs.dst * width + arcs.il, [arcs.start * width]])
    pairs, inverse = np.unique(keys, return_inverse=True)
    state, label = pairs // width, pairs % width
    first = np.searchsorted(state, state)
    rank = np.arange(pairs.size) - first
    extra = rank > 0
    target = state.copy()
    target[extra] = n + np.arange(int(extra.sum()))
    new_dst = target[inverse[:-1]]
    cls = np.zeros(n + int(extra.sum()), dtype=np.int64)
    cls[target] = label
    orig = state[extra]
    by_src = np.argsort(arcs.src, kind="stable")
    bounds = np.searchsorted(arcs.src[by_src], np.arange(n + 1))
    lens = bounds[orig + 1] - bounds[orig]
    offsets = np.repeat(bounds[orig] - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    idx = by_src[offsets + np.arange(int(lens.sum()))]
    src = np.concatenate([arcs.src, np.repeat(target[extra], lens)])
    dst = np.concatenate([new_dst, new_dst[idx]])
    il = np.concatenate([arcs.il, arcs.il[idx]])
    ol = np.concatenate([arcs.ol, arcs.ol[idx]])
    w = np.concatenate([arcs.w, arcs.w[idx]])
    finals = dict(arcs.finals)
    for q, copy in zip(orig.tolist(), target[extra].tolist(), strict=True):
        if q in finals:
            finals[copy] = finals[q]
    pdf = cls - 1
    has_loop = pdf >= 0
    p = np.where(has_loop, self_loop[np.maximum(pdf, 0)], 0.0)
    loop_cost = np.where(has_loop, -scale * np.log(np.maximum(p, 1e-10)), 0.0)
    exit_cost = np.where(has_loop, -scale * np.log(np.maximum(1.0 - p, 1e-10)), 0.0)
    w = w + exit_cost[src]
    finals = {s: fw + float(exit_cost[s]) for s, fw in finals.items()}
    loops = np.flatnonzero(has_loop)
    return Arcs(src=np.concatenate([src, loops]), dst=np.concatenate([dst, loops]),
                il=np.concatenate([il, cls[loops]]), ol=np.concatenate([ol, np.zeros_like(loops)]),
                w=np.concatenate([w, loop_cost[loops]]), finals=finals, start=arcs.start,
                num_states=cls.size)


def random_graph(seed: int, sort: bool) -> Arcs:
    """Many states entered by several pdfs, epsilons, several finals; float32 weights."""
    rng = np.random.default_rng(seed)
    n, m = 400, 2000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    if sort:
        src = np.sort(src)
    w = rng.random(m).astype(np.float32).astype(np.float64)
    finals = {int(s): float(np.float32(rng.random())) for s in rng.choice(n, 20, replace=False)}
    return Arcs(src=src, dst=dst, il=rng.integers(0, 9, m), ol=rng.integers(0, 5, m), w=w,
                finals=finals, start=3, num_states=n)


def narrow(a: Arcs) -> Arcs:
    return Arcs(src=a.src.astype(np.int32), dst=a.dst.astype(np.int32), il=a.il.astype(np.int32),
                ol=a.ol.astype(np.int32), w=a.w.astype(np.float32), finals=a.finals,
                start=a.start, num_states=a.num_states)


def test_self_loops_write_the_same_bytes_as_the_wide_arrays(tmp_path):
    loops = np.random.default_rng(9).uniform(0.1, 0.9, size=8)
    for seed in range(4):
        for sort in (True, False):
            arcs = random_graph(seed, sort)
            write_const(wide_self_loops(arcs, loops, 0.1), tmp_path / "wide.fst")
            got = add_self_loops(narrow(arcs), loops, 0.1)
            assert got.src.dtype == got.il.dtype == np.int32 and got.w.dtype == np.float32
            assert got.num_states > arcs.num_states             # states were split
            write_const(got, tmp_path / "narrow.fst")
            assert (tmp_path / "wide.fst").read_bytes() == (tmp_path / "narrow.fst").read_bytes()


def test_read_const_keeps_the_file_types_and_bytes(tmp_path):
    arcs = add_self_loops(narrow(random_graph(1, True)), np.full(8, 0.5), 0.1)
    write_const(arcs, tmp_path / "a.fst")
    back = read_const(tmp_path / "a.fst")
    assert back.dst.dtype == np.int32 and back.w.dtype == np.float32
    assert back.finals == {s: float(np.float32(w)) for s, w in arcs.finals.items()}
    write_const(back, tmp_path / "b.fst")
    assert (tmp_path / "a.fst").read_bytes() == (tmp_path / "b.fst").read_bytes()
    release_memory()   # a no-op where the C library has no malloc_trim
