"""Forced alignment: the decoder's Viterbi beam search on an utterance's own graph.

This is what Kaldi's ``gmm-align-compiled`` does: kaldi-decoder's FasterDecoder (the
decoder ``asrtrain decode`` uses) on the per-utterance graph, likelihoods scaled by the
acoustic scale (0.1), and when the best path does not reach the graph's end at
``beam``, one more try at ``retry_beam``. Each input label of the graph is one HMM
state of it, so the likelihood matrix has one column per graph state (a gather of the
model's pdf columns) and the best path's labels are the alignment itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from asrtrain.align.graph import HmmGraph, PhoneDag

#: Kaldi's alignment defaults (steps/align_si.sh, train_mono.sh).
ACWT = 0.1
BEAM = 10.0
RETRY_BEAM = 40.0
#: asrtrain's own: a last try for the final alignments (an unseen speaker's dev or test
#: utterances can fall out of 40 where the path is still right).
LAST_BEAM = 400.0


@dataclass
class Alignment:
    """One utterance's frames: pdf, phone, HMM state, and where each phone starts."""

    pdf: np.ndarray
    phone: np.ndarray
    state: np.ndarray
    starts: np.ndarray      # first frame of every phone (two equal phones stay two)
    retried: bool = False   # found at the retry beam (or the last one)
    last: bool = False      # found only at the last beam

    def segments(self) -> list[tuple[int, int, int]]:
        """``(phone, start, frames)`` per phone."""
        ends = np.concatenate([self.starts[1:], [len(self.phone)]])
        return [(int(self.phone[s]), int(s), int(e - s)) for s, e in zip(self.starts, ends,
                                                                        strict=True)]


def decode_labels(graph: HmmGraph, scores: np.ndarray, beam: float, min_active: int = 20
                  ) -> np.ndarray | None:
    """Best path labels (0-based graph states per frame), or None if no path reaches the
    end within ``beam``."""
    import kaldi_decoder
    import kaldifst

    decoder = kaldi_decoder.FasterDecoder(
        graph.fst, kaldi_decoder.FasterDecoderOptions(beam=beam, min_active=min_active))
    decoder.decode(kaldi_decoder.DecodableCtc(np.ascontiguousarray(scores, dtype=np.float32)))
    if not decoder.reached_final():
        return None
    ok, lattice = decoder.get_best_path(use_final_probs=True)
    if not ok:
        return None
    linear, ilabels, _, _ = kaldifst.get_linear_symbol_sequence(lattice)
    labels = np.asarray(ilabels, dtype=np.int64) - 1
    if not linear or len(labels) != scores.shape[0]:
        return None
    return labels


def align(graph: HmmGraph, dag: PhoneDag, loglikes: np.ndarray, acwt: float = ACWT,
          beam: float = BEAM, retry_beam: float = RETRY_BEAM, min_active: int = 20,
          last_beam: float = 0.0) -> Alignment | None:
    """Align frames whose pdf log-likelihoods are ``loglikes[T, graph pdfs]`` (columns in
    the order of ``np.unique(graph.pdf)``); the beams are tried in turn (``beam``, then
    ``retry_beam``, then ``last_beam`` where it is wider); None if none finds a path.
    ``min_active`` tokens survive whatever the beam (FasterDecoder's default, 20)."""
    if loglikes.shape[0] < graph.min_frames:
        return None
    pdfs = np.unique(graph.pdf)
    column = np.searchsorted(pdfs, graph.pdf)
    scores = acwt * loglikes[:, column]
    tries = [beam]
    for wider in (retry_beam, last_beam):
        if wider > tries[-1]:
            tries.append(wider)
    labels = None
    for width in tries:
        labels = decode_labels(graph, scores, width, min_active)
        if labels is not None:
            break
    if labels is None:
        return None
    occ = graph.occurrence[labels]
    inst = graph.instance[labels]
    state = graph.state[labels]
    new_phone = np.concatenate([[True], (inst[1:] != inst[:-1]) | (state[1:] < state[:-1])])
    phones = np.asarray(dag.phones, dtype=np.int64)[occ]
    return Alignment(pdf=graph.pdf[labels], phone=phones, state=state,
                     starts=np.flatnonzero(new_phone), retried=width > beam,
                     last=width > beam and width == last_beam > retry_beam)


def equal_alignment(graph_pdfs: list[tuple[int, int, int]], frames: int) -> Alignment | None:
    """Kaldi's ``align-equal``: the frames shared evenly by a fixed sequence of
    ``(pdf, phone, state)`` HMM states (None when there are fewer frames than states)."""
    n = len(graph_pdfs)
    if frames < n:
        return None
    which = (np.arange(frames) * n) // frames
    table = np.asarray(graph_pdfs, dtype=np.int64)
    state = table[which, 2]
    phone_change = np.concatenate([[True], (which[1:] != which[:-1]) & (state[1:] == 0)])
    return Alignment(pdf=table[which, 0], phone=table[which, 1], state=state,
                     starts=np.flatnonzero(phone_change))
