"""Walking G.fst as ARPA back-off does (tests): a word's arc if the state has one, else
the ``#0`` back-off arc and try again; ``</s>`` is a final weight, reached the same way."""

from __future__ import annotations

import math
from pathlib import Path


def g_path_cost(g_path: Path, words_txt: dict[str, int], sent: list[str]) -> float:
    """−ln p of ``<s> sent </s>`` along G.fst."""
    import kaldifst

    fst = kaldifst.StdVectorFst.read(str(g_path))
    arcs = {s: {a.ilabel: (a.weight.value, a.nextstate) for a in kaldifst.ArcIterator(fst, s)}
            for s in range(fst.num_states)}
    state, total, backoff = fst.start, 0.0, words_txt["#0"]
    for w in [words_txt[w] for w in sent]:
        while w not in arcs[state]:
            cost, state = arcs[state][backoff]
            total += cost
        cost, state = arcs[state][w]
        total += cost
    while not math.isfinite(fst.final(state).value):
        cost, state = arcs[state][backoff]
        total += cost
    return total + fst.final(state).value
