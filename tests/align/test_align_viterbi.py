"""Forced alignment recovers a known alignment; the retry beam and too-short audio."""

from __future__ import annotations

import numpy as np
import torch

from asrtrain.align.aligner import align, equal_alignment
from asrtrain.align.am import AcousticModel
from asrtrain.align.graph import expand, phone_dag
from asrtrain.align.hmm import MonoPdfs, Transitions

SIL = 1
PHONES = [1, 5, 6, 7]


def true_model(pdfs: MonoPdfs, dim: int = 4, seed: int = 0) -> AcousticModel:
    """Well separated unit-variance Gaussians, one per (phone, state)."""
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(pdfs.num_pdfs, 1, dim, generator=g, dtype=torch.float64) * 4.0
    return AcousticModel(means, torch.ones_like(means), torch.zeros(pdfs.num_pdfs, 1, dtype=torch.float64))


def frames_for(model: AcousticModel, pdf_seq: list[int], seed: int = 1) -> np.ndarray:
    g = np.random.default_rng(seed)
    mu = model.means[pdf_seq, 0].numpy()
    return (mu + g.normal(0.0, 1.0, mu.shape)).astype(np.float32)


def test_alignment_recovers_the_states_that_made_the_frames() -> None:
    pdfs = MonoPdfs(PHONES)
    model = true_model(pdfs)
    # sil(4 4 4) 5(3 5 2) 6(2 2 6) 6(3 3 3) 7(4 1 5), no final silence: "6 6" stays two phones
    plan = [(1, [4, 4, 4]), (5, [3, 5, 2]), (6, [2, 2, 6]), (6, [3, 3, 3]), (7, [4, 1, 5])]
    pdf_seq, starts, t = [], [], 0
    for phone, durs in plan:
        starts.append(t)
        for s, n in enumerate(durs):
            pdf_seq += [pdfs.pdf(0, phone, 0, s)] * n
            t += n
    dag = phone_dag([[(5, 6)], [(6, 7)]], SIL)
    graph = expand(dag, pdfs, Transitions.initial(PHONES).self_loop)
    x = frames_for(model, pdf_seq)
    got = align(graph, dag, model.loglikes(x, np.unique(graph.pdf)))
    assert got is not None and not got.retried
    assert got.pdf.tolist() == pdf_seq
    assert got.starts.tolist() == starts
    assert [p for p, _, _ in got.segments()] == [1, 5, 6, 6, 7]


def test_a_hard_utterance_needs_the_retry_beam_and_a_short_one_fails() -> None:
    pdfs = MonoPdfs(PHONES)
    model = true_model(pdfs)
    dag = phone_dag([[(5,)], [(6,)]], SIL)
    graph = expand(dag, pdfs, Transitions.initial(PHONES).self_loop)
    # the utterance ends inside the first state of 6: at the last frame the paths that
    # reach the end are far behind the best one, and only a wide beam keeps them
    seq = [pdfs.pdf(0, 5, 0, s) for s in range(3) for _ in range(4)] + \
          [pdfs.pdf(0, 6, 0, 0)] * 12
    x = frames_for(model, seq)
    ll = model.loglikes(x, np.unique(graph.pdf))
    assert align(graph, dag, ll, beam=2.0, retry_beam=2.0, min_active=1) is None
    got = align(graph, dag, ll, beam=2.0, retry_beam=1e4, min_active=1)
    assert got is not None and got.retried
    assert align(graph, dag, ll[:5]) is None      # 5 frames for 2 phones of 3 states


def test_equal_alignment_shares_frames_evenly() -> None:
    ali = equal_alignment([(0, 1, 0), (1, 1, 1), (2, 1, 2), (3, 5, 0), (4, 5, 1), (5, 5, 2)], 12)
    assert ali is not None
    assert ali.pdf.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    assert ali.starts.tolist() == [0, 6]
    assert equal_alignment([(0, 1, 0)] * 6, 5) is None


def test_matched_pairs_are_the_equal_symbols_of_an_edit_distance_alignment() -> None:
    from asrtrain.align.evaluate import matched_pairs

    # hyp 1 3 4 5 against ref 1 2 3 4: ref's 2 deleted, hyp's 5 inserted
    assert matched_pairs([1, 3, 4, 5], [1, 2, 3, 4]) == [(0, 0), (1, 2), (2, 3)]
    assert matched_pairs([], [1, 2]) == []
