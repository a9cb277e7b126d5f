"""GMMs for the tree's back-off pdfs, which the training alignments never visit.

asrtrain's tree gives a context its triphone leaf, else its biphone node, else the
phone state's context-independent pdf. Training frames all land on the most specific
pdf that exists for their context, so a back-off pdf whose contexts all have leaves of
their own gets no frames and would keep the flat start's global Gaussian. Alignment
never asks for it (a transcript's contexts are training contexts), but a decoding graph
does, for every context training did not have (a word pair never seen across a word
boundary), and a global Gaussian there lets the decoder insert words through silence
(seen on yesno: 68 insertions in 232 words). Kaldi's question trees (``lang/questions.py``, the
aligner's default) have no such nodes: each leaf is a set of contexts with data. Here each back-off pdf without frames
of its own becomes one Gaussian of the frames of the pdfs it backs off for, pooled,
re-estimated at every iteration.
"""

from __future__ import annotations

import torch

from asrtrain.align.am import AcousticModel, GmmStats
from asrtrain.lang.tree import ContextTree, _uses_left


def backed_off(tree: ContextTree) -> dict[int, list[int]]:
    """Back-off pdf → the pdfs it stands in for (a CI state: every pdf of its phone state;
    a biphone node: its triphone leaves)."""
    out: dict[int, list[int]] = {}
    by_state: dict[tuple[int, int], list[int]] = {}
    for pdf, key in enumerate(tree.pdf_info):
        by_state.setdefault(key, []).append(pdf)
    for key, pdf in tree.ci.items():
        out[pdf] = [p for p in by_state.get(key, []) if p != pdf]
    for (c, s, ctx), pdf in tree.bi.items():
        left = _uses_left(s, tree.topo.num_states[c])
        out[pdf] = [leaf for (lc, cc, rc, ss), leaf in tree.tri.items()
                    if cc == c and ss == s and (lc if left else rc) == ctx]
    return out


def fill_backoffs(model: AcousticModel, stats: GmmStats, backoffs: dict[int, list[int]],
                  var_floor: torch.Tensor) -> int:
    """Give every back-off pdf without frames one Gaussian of its pdfs' pooled frames;
    returns how many were filled."""
    occ = stats.occ.sum(1)
    filled = 0
    for pdf, under in backoffs.items():
        if occ[pdf] > 0 or not under:
            continue
        n = float(occ[under].sum())
        if n <= 0:
            continue
        mean = stats.sx[under].sum((0, 1)) / n
        var = torch.maximum(stats.sxx[under].sum((0, 1)) / n - mean ** 2,
                            var_floor.to(torch.float64))
        model.means[pdf] = mean
        model.vars[pdf] = var
        model.logw[pdf] = -torch.inf
        model.logw[pdf, 0] = 0.0
        filled += 1
    if filled:
        model.invalidate()
    return filled
