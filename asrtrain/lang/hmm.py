"""HMM topology and transition probabilities, estimated from frame alignments.

Each phone is a left-to-right HMM (3 states by default; silence has its own entry and
its own probabilities). Where the aligner knew each frame's HMM state (an HMM-GMM
aligner does: ``prepare align`` writes ``state.scp``), the states are those; a phone-only
alignment (the synthesizer's) is split uniformly, frame t of an n-frame segment going to
state ⌊t·S/n⌋, so a segment shorter than S frames visits only the first states and
leaves early: besides the self-loop and the step to the next state, every state may exit
the phone. The probabilities are counts of those moves in the training alignments plus
small pseudo-counts, so unseen phones still have a usable HMM.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Union

import numpy as np

from asrtrain.core.errors import InputError

# pseudo-counts added to the counted moves: self-loop, next state, early exit, last exit
PRIOR = {"self": 1.0, "next": 1.0, "early_exit": 0.05, "exit": 1.0}


@dataclass(frozen=True)
class FrameAlignment:
    """One utterance: a phone per frame, where phones start (a CTM's cuts: two equal
    phones in a row stay two) and, where the aligner knew them, the HMM state per frame."""

    phones: np.ndarray
    cuts: Sequence[int] = ()
    states: np.ndarray | None = None
    utt: str = "?"

    def segments(self) -> list[tuple[int, int, int]]:
        """``(phone, start, length)``; with states, a phone also starts where the state
        index falls (``d d``: state 2 then state 0)."""
        cuts = self.cuts
        if self.states is not None:
            resets = np.flatnonzero(np.diff(self.states) < 0) + 1
            cuts = sorted(set(cuts) | set(resets.tolist()))
        return segments(self.phones, cuts)

    def segment_states(self, phone: int, start: int, n: int, num_states: int) -> np.ndarray:
        """The HMM state of each frame of one phone segment: the aligner's, else the
        uniform split."""
        if self.states is None:
            return state_split(n, num_states)
        st = np.asarray(self.states[start:start + n])
        if st.size and int(st.max()) >= num_states:
            raise InputError(f"utterance {self.utt}: frame {start + int(np.argmax(st))} is in "
                             f"HMM state {int(st.max())} of phone id {phone}, which has "
                             f"{num_states} states in the topology (align and lang must agree)")
        return st


Alignment = Union[np.ndarray, tuple[np.ndarray, Sequence[int]], FrameAlignment]  # noqa: UP007


def segments(ali: np.ndarray, cuts: Sequence[int] = ()) -> list[tuple[int, int, int]]:
    """Phone segments ``(phone, start, length)`` of a frame alignment.

    A segment ends where the phone id changes and at every frame in ``cuts``: a frame
    alignment cannot show where two equal phones meet ("made doors": d d), the
    corpus' phone CTM can.
    """
    ali = np.asarray(ali)
    if ali.size == 0:
        return []
    change = np.flatnonzero(np.diff(ali)) + 1
    extra = np.asarray([c for c in cuts if 0 < c < ali.size], dtype=np.int64)
    starts = np.union1d(np.concatenate(([0], change)), extra)
    ends = np.concatenate((starts[1:], [ali.size]))
    return [(int(ali[s]), int(s), int(e - s)) for s, e in zip(starts, ends, strict=True)]


def as_frames(item: Alignment) -> FrameAlignment:
    """An alignment given alone, with its CTM cuts, or whole, as a :class:`FrameAlignment`."""
    if isinstance(item, FrameAlignment):
        return item
    if isinstance(item, tuple):
        return FrameAlignment(np.asarray(item[0]), item[1])
    return FrameAlignment(np.asarray(item))


def state_split(n: int, num_states: int) -> np.ndarray:
    """The state of each of ``n`` frames under the uniform split ⌊t·S/n⌋."""
    return (np.arange(n) * num_states) // n


@dataclass
class Topology:
    """Per phone: number of states and, per state, ``{dest: prob}`` (dest == S is the exit)."""

    num_states: dict[int, int]
    trans: dict[int, list[dict[int, float]]]

    def self_loop(self, phone: int, state: int) -> float:
        """The self-loop probability of a state (the decoder's duration model)."""
        return self.trans[phone][state].get(state, 0.0)

    def forward(self, phone: int, state: int) -> dict[int, float]:
        """Moves out of a state, renormalised without the self-loop (what H carries)."""
        moves = {d: p for d, p in self.trans[phone][state].items() if d != state}
        total = sum(moves.values())
        return {d: p / total for d, p in moves.items()}

    def to_json(self) -> dict:
        return {"num_states": {str(k): v for k, v in self.num_states.items()},
                "trans": {str(k): [{str(d): p for d, p in st.items()} for st in v]
                          for k, v in self.trans.items()}}

    @classmethod
    def from_json(cls, data: dict) -> Topology:
        return cls(num_states={int(k): int(v) for k, v in data["num_states"].items()},
                   trans={int(k): [{int(d): float(p) for d, p in st.items()} for st in v]
                          for k, v in data["trans"].items()})


def count_moves(alignments: Iterable[Alignment], num_states: dict[int, int]
                ) -> dict[int, np.ndarray]:
    """Per phone a ``[S, S+1]`` matrix of counted moves (the aligner's states, or the
    uniform split)."""
    counts = {p: np.zeros((s, s + 1)) for p, s in num_states.items()}
    for item in alignments:
        ali = as_frames(item)
        for phone, start, n in ali.segments():
            s_count = num_states.get(phone)
            if s_count is None:
                continue
            st = ali.segment_states(phone, start, n, s_count)
            c = counts[phone]
            np.add.at(c, (st[:-1], st[1:]), 1.0)
            c[st[-1], s_count] += 1.0
    return counts


def estimate_topology(alignments: Iterable[Alignment], phones: Iterable[int],
                      states: int = 3, sil_phones: Iterable[int] = (), sil_states: int = 3
                      ) -> Topology:
    """Topology and transition probabilities from frame-level phone alignments."""
    num_states = states_per_phone(phones, states, sil_phones, sil_states)
    return topology_from_moves(count_moves(alignments, num_states), num_states)


def states_per_phone(phones: Iterable[int], states: int = 3, sil_phones: Iterable[int] = (),
                     sil_states: int = 3) -> dict[int, int]:
    sil = set(sil_phones)
    return {p: (sil_states if p in sil else states) for p in phones}


def topology_from_moves(counts: dict[int, np.ndarray], num_states: dict[int, int]) -> Topology:
    """:func:`estimate_topology` from moves already counted (alignment jobs count theirs,
    the parent sums them)."""
    trans: dict[int, list[dict[int, float]]] = {}
    for phone, s_count in num_states.items():
        rows = []
        for s in range(s_count):
            moves = {s: PRIOR["self"]}
            if s + 1 < s_count:
                moves[s + 1] = PRIOR["next"]
                moves[s_count] = PRIOR["early_exit"]
            else:
                moves[s_count] = PRIOR["exit"]
            for d in moves:
                moves[d] += counts[phone][s, d]
            total = sum(moves.values())
            rows.append({d: float(c / total) for d, c in moves.items()})
        trans[phone] = rows
    return Topology(num_states=num_states, trans=trans)


def neg_log(p: float) -> float:
    """A cost: −ln p (tropical weight)."""
    return -math.log(p)
