"""What an alignment job derives from the alignments it holds, so that the parent never
holds them (a frame's pdf, phone and state are 24 B: 8 GB at 960 h in one process).

As in Kaldi, where each job keeps ``ali.N.gz`` and the tree is built from statistics
the jobs accumulate (``acc-tree-stats``, summed by ``sum-tree-stats``): a job makes its
equal alignments, relabels its frames under a new tree, counts the moves and contexts
the topology and the tree are estimated from, counts its frames per pdf and writes its
part of the output. The parent sums the counts (whole numbers: any order gives the same
sums) and merges the parts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

import numpy as np

from asrtrain.align.aligner import Alignment, equal_alignment
from asrtrain.align.graph import PhoneDag
from asrtrain.align.hmm import MonoPdfs, TreePdfs, context_pdfs
from asrtrain.lang import questions
from asrtrain.lang.hmm import FrameAlignment, Topology, count_moves
from asrtrain.lang.questions import ContextStats
from asrtrain.lang.tree import context_counts

#: HMM states of a phone in the equal alignments of a flat start.
EQUAL_STATES = 3


def equal_alignments(dags: dict[str, PhoneDag], frames: Callable[[str], int], pdfs: MonoPdfs
                     ) -> tuple[dict[str, Alignment], list[str]]:
    """Kaldi's ``align-equal`` of every transcript's first pronunciations between two
    silences; the utterances with fewer frames than states apart."""
    out: dict[str, Alignment] = {}
    short: list[str] = []
    for utt, dag in dags.items():
        ali = equal_alignment([(pdfs.pdf(0, p, 0, s), p, s) for p in dag.first_path
                               for s in range(EQUAL_STATES)], frames(utt))
        if ali is None:
            short.append(utt)
        else:
            out[utt] = ali
    return out, short


def relabel(alignments: dict[str, Alignment], pdfs: MonoPdfs | TreePdfs) -> None:
    """Every frame's pdf under ``pdfs`` (a new tree), from its phone, state and context."""
    for a in alignments.values():
        a.pdf = context_pdfs(a.phone, a.state, a.starts, pdfs)


def phone_items(alignments: dict[str, Alignment]) -> list[FrameAlignment]:
    """The alignments as the topology and the tree read them."""
    return [FrameAlignment(a.phone, a.starts.tolist(), a.state, u)
            for u, a in alignments.items()]


def moves(alignments: dict[str, Alignment], num_states: dict[int, int]) -> dict[int, np.ndarray]:
    """Counted state moves per phone (``lang.hmm.topology_from_moves`` reads their sum)."""
    return count_moves(phone_items(alignments), num_states)


def contexts(alignments: dict[str, Alignment], topo: Topology) -> Counter:
    """Frames per (left, phone, right, state) (``lang.tree.tree_from_counts`` reads their sum)."""
    return context_counts(phone_items(alignments), topo)


def context_stats(alignments: dict[str, Alignment], feats: Mapping[str, np.ndarray]
                  ) -> ContextStats:
    """Frames, sums and squares of the features per (left, phone, right, state)
    (``lang.questions.question_tree`` reads their sum)."""
    return questions.context_stats(((feats[u], a.phone, a.state, a.starts)
                                    for u, a in sorted(alignments.items())))


def pdf_frames(alignments: dict[str, Alignment], num_pdfs: int) -> np.ndarray:
    """Frames per pdf."""
    out = np.zeros(num_pdfs, dtype=np.int64)
    for a in alignments.values():
        out += np.bincount(a.pdf, minlength=num_pdfs)
    return out


def add_counts(into: dict, add: dict) -> dict:
    """``into`` plus ``add``, key by key (moves: arrays; contexts: integers)."""
    for key, value in add.items():
        into[key] = into[key] + value if key in into else value
    return into
