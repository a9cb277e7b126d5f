"""The aligner's HMMs: Kaldi's 3-state left-to-right topology, pdf maps, and
self-loop probabilities re-estimated from state-level alignments.

Every phone (silence too) is three emitting states, each with a self-loop and a step
to the next; the last steps out of the phone. So a phone lasts at least three frames,
as in Kaldi's standard topology. A monophone model has one pdf per (phone, state);
a context-dependent one asks asrtrain's tree (``lang/tree.py``) for the pdf of a
state between its left and right neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from asrtrain.lang.tree import ContextTree

#: Emitting states per phone.
STATES = 3
#: Kaldi's initial self-loop probability (the topology's 0.75 / 0.25).
INIT_SELF_LOOP = 0.75
#: Bounds that keep a re-estimated self-loop usable in a graph.
SELF_LOOP_RANGE = (0.05, 0.98)


@dataclass
class MonoPdfs:
    """One pdf per (phone, state), phones in the order given."""

    phones: list[int]
    states: int = STATES
    context_dependent: bool = False

    def num_states(self, phone: int) -> int:
        return self.states

    index: dict[int, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {p: i for i, p in enumerate(self.phones)}

    def pdf(self, left: int, phone: int, right: int, state: int) -> int:
        return self.index[phone] * self.states + state

    @property
    def num_pdfs(self) -> int:
        return len(self.phones) * self.states

    def info(self) -> list[tuple[int, int]]:
        """(phone, state) of each pdf."""
        return [(p, s) for p in self.phones for s in range(self.states)]


@dataclass
class TreePdfs:
    """The pdfs of asrtrain's context tree (every phone ``STATES`` states)."""

    tree: ContextTree
    context_dependent: bool = True

    def num_states(self, phone: int) -> int:
        return self.tree.topo.num_states[phone]

    def pdf(self, left: int, phone: int, right: int, state: int) -> int:
        return self.tree.pdf(left, phone, right, state)

    @property
    def num_pdfs(self) -> int:
        return self.tree.num_pdfs

    def info(self) -> list[tuple[int, int]]:
        return list(self.tree.pdf_info)


@dataclass
class Transitions:
    """Self-loop probability per (phone, state)."""

    self_loop: dict[tuple[int, int], float] = field(default_factory=dict)

    @classmethod
    def initial(cls, phones: Iterable[int], states: int = STATES) -> Transitions:
        return cls({(p, s): INIT_SELF_LOOP for p in phones for s in range(states)})

    def reestimate(self, frames: dict[tuple[int, int], int], visits: dict[tuple[int, int], int]
                   ) -> None:
        """p(self) = (frames − visits) / frames per state seen (Kaldi's ML update with
        its floor on unseen transitions)."""
        lo, hi = SELF_LOOP_RANGE
        for key, n in frames.items():
            v = visits.get(key, 0)
            if n > 0 and v > 0:
                self.self_loop[key] = float(min(max((n - v) / n, lo), hi))


def count_states(phones: np.ndarray, states: np.ndarray, starts: np.ndarray,
                 frames: dict[tuple[int, int], int], visits: dict[tuple[int, int], int]) -> None:
    """Add one utterance's frames and visits per (phone, state)."""
    for p, s in zip(phones.tolist(), states.tolist(), strict=True):
        frames[(p, s)] = frames.get((p, s), 0) + 1
    change = np.concatenate([[True], states[1:] != states[:-1]])
    change[starts] = True
    for t in np.flatnonzero(change).tolist():
        key = (int(phones[t]), int(states[t]))
        visits[key] = visits.get(key, 0) + 1


def context_pdfs(phones: np.ndarray, states: np.ndarray, starts: np.ndarray,
                 pdfs: MonoPdfs | TreePdfs) -> np.ndarray:
    """The pdf of every frame of an alignment under another pdf map (its contexts taken
    from the neighbouring phones)."""
    seg_phone = phones[starts]
    ends = np.concatenate([starts[1:], [len(phones)]])
    out = np.empty(len(phones), dtype=np.int64)
    for i, (s, e) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        left = int(seg_phone[i - 1]) if i > 0 else 0
        right = int(seg_phone[i + 1]) if i + 1 < len(seg_phone) else 0
        phone = int(seg_phone[i])
        table = np.asarray([pdfs.pdf(left, phone, right, k)
                            for k in range(pdfs.num_states(phone))])
        out[s:e] = table[states[s:e]]
    return out
