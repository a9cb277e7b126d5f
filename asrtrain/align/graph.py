"""Per-utterance alignment graphs: the transcript's words, every pronunciation of each,
optional silence between words, expanded to HMM states (with each phone's context).

The graph is built in two steps. First a small DAG of phone *occurrences* (a phone of
one pronunciation of one word, or the optional silence at a word junction), with costs
on its edges (−log of the silence probability). Then every occurrence becomes one HMM
per (left, right) context that its neighbours in the DAG can give it (one for a
monophone model), each a left-to-right chain of states with self-loops, and the edges
join the last state of one HMM to the first of the next. Each HMM state of the graph
gets its own input label, so the decoder's best path names, per frame, the occurrence
and the state it is in: phones, their boundaries (even between two equal phones), the
pronunciation chosen and the states all follow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

#: Probability of the optional silence at a word junction and at either end (Kaldi's 0.5).
SIL_PROB = 0.5
START, END = -1, -2


class PdfMap(Protocol):
    """What the graph needs of a model: states per phone and the pdf of a state in context."""

    context_dependent: bool

    def num_states(self, phone: int) -> int: ...

    def pdf(self, left: int, phone: int, right: int, state: int) -> int: ...


@dataclass
class PhoneDag:
    """Phone occurrences and weighted edges between them (START and END are virtual)."""

    phones: list[int] = field(default_factory=list)
    word_of: list[int] = field(default_factory=list)       # word position, −1 for silence
    edges: list[tuple[int, int, float]] = field(default_factory=list)
    first_path: list[int] = field(default_factory=list)   # sil, first pronunciations, sil

    def add(self, phone: int, word: int) -> int:
        self.phones.append(phone)
        self.word_of.append(word)
        return len(self.phones) - 1


def phone_dag(prons: list[list[tuple[int, ...]]], sil: int, sil_prob: float = SIL_PROB
              ) -> PhoneDag:
    """The DAG of a transcript given each word's pronunciations (phone id tuples)."""
    dag = PhoneDag(first_path=[sil, *(p for word in prons for p in word[0]), sil])
    p_sil, p_no = -math.log(sil_prob), -math.log(1.0 - sil_prob)
    ends: list[tuple[int, float]] = [(START, 0.0)]  # nodes the next word may follow, with a cost
    for pos in range(len(prons) + 1):
        s = dag.add(sil, -1)
        for node, cost in ends:
            dag.edges.append((node, s, cost + p_sil))
        ends = [(node, cost + p_no) for node, cost in ends] + [(s, 0.0)]
        if pos == len(prons):
            break
        new_ends: list[tuple[int, float]] = []
        for pron in prons[pos]:
            prev = [(node, cost) for node, cost in ends]
            for phone in pron:
                cur = dag.add(phone, pos)
                for node, cost in prev:
                    dag.edges.append((node, cur, cost))
                prev = [(cur, 0.0)]
            new_ends.extend(prev)
        ends = new_ends
    for node, cost in ends:
        dag.edges.append((node, END, cost))
    return dag


@dataclass
class HmmGraph:
    """An alignment FST and, per input label − 1, what it stands for."""

    fst: object                    # kaldifst.StdVectorFst
    pdf: np.ndarray                # per label − 1: the pdf whose likelihood it reads
    occurrence: np.ndarray         # per label − 1: the DAG node (phone occurrence)
    state: np.ndarray              # per label − 1: the HMM state within the phone
    instance: np.ndarray           # per label − 1: the HMM (occurrence in one context)
    min_frames: int                # the shortest path's length in frames


def expand(dag: PhoneDag, pdfs: PdfMap, self_loop: dict[tuple[int, int], float],
           self_loop_scale: float = 0.1, transition_scale: float = 1.0) -> HmmGraph:
    """The HMM-level FST of a phone DAG (input labels: 1 + the graph's own state index).

    ``self_loop[(phone, state)]`` is the self-loop probability; arcs carry
    −log p scaled as Kaldi's aligner does (self-loops by 0.1, the rest by 1.0).
    """
    import kaldifst

    n = len(dag.phones)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b, c in dag.edges:
        if b >= 0:
            preds[b].append((a, c))
        if a >= 0:
            succs[a].append((b, c))

    def ctx(node: int) -> int:
        return 0 if node < 0 else dag.phones[node]

    # HMM instances: (occurrence, left phone, right phone)
    inst_key: dict[tuple[int, int, int], int] = {}
    inst_list: list[tuple[int, int, int]] = []
    for v in range(n):
        lefts = sorted({ctx(u) for u, _ in preds[v]}) if pdfs.context_dependent else [0]
        rights = sorted({ctx(w) for w, _ in succs[v]}) if pdfs.context_dependent else [0]
        for left in lefts:
            for right in rights:
                inst_key[(v, left, right)] = len(inst_list)
                inst_list.append((v, left, right))

    fst = kaldifst.StdVectorFst()
    start = fst.add_state()
    fst.start = start
    label_pdf: list[int] = []
    label_occ: list[int] = []
    label_state: list[int] = []
    label_inst: list[int] = []
    first: list[int] = []   # per instance: its first state's FST state
    first_label: list[int] = []
    last: list[int] = []    # per instance: its last state's FST state
    for i, (v, left, right) in enumerate(inst_list):
        phone = dag.phones[v]
        count = pdfs.num_states(phone)
        states: list[int] = []
        for s in range(count):
            st = fst.add_state()
            label = len(label_pdf) + 1
            label_pdf.append(pdfs.pdf(left, phone, right, s))
            label_occ.append(v)
            label_state.append(s)
            label_inst.append(i)
            p_self = self_loop[(phone, s)]
            fst.add_arc(st, kaldifst.StdArc(label, 0, -math.log(p_self) * self_loop_scale, st))
            if states:
                p_prev = self_loop[(phone, s - 1)]
                fst.add_arc(states[-1], kaldifst.StdArc(
                    label, 0, -math.log(1.0 - p_prev) * transition_scale, st))
            states.append(st)
            if s == 0:
                first_label.append(label)
        first.append(states[0])
        last.append(states[-1])

    by_left: dict[tuple[int, int], list[int]] = {}
    for (v, left, _), j in inst_key.items():
        by_left.setdefault((v, left), []).append(j)
    for i, (v, _, right) in enumerate(inst_list):
        phone = dag.phones[v]
        exit_cost = -math.log(1.0 - self_loop[(phone, pdfs.num_states(phone) - 1)]) \
            * transition_scale
        for w, cost in succs[v]:
            if w == END:
                if right == 0 or not pdfs.context_dependent:
                    fst.set_final(last[i], exit_cost + cost)
                continue
            if pdfs.context_dependent and dag.phones[w] != right:
                continue
            wl = phone if pdfs.context_dependent else 0
            for j in by_left.get((w, wl), []):
                fst.add_arc(last[i], kaldifst.StdArc(first_label[j], 0, exit_cost + cost,
                                                     first[j]))
    for v in range(n):
        for u, cost in preds[v]:
            if u != START:
                continue
            for j in by_left.get((v, 0), []):
                fst.add_arc(start, kaldifst.StdArc(first_label[j], 0, cost, first[j]))
    return HmmGraph(fst=fst, pdf=np.asarray(label_pdf, dtype=np.int64),
                    occurrence=np.asarray(label_occ, dtype=np.int64),
                    state=np.asarray(label_state, dtype=np.int64),
                    instance=np.asarray(label_inst, dtype=np.int64),
                    min_frames=_min_phones(dag, pdfs))


def _min_phones(dag: PhoneDag, pdfs: PdfMap) -> int:
    """Frames of the shortest path (every state visited once, silences skipped)."""
    n = len(dag.phones)
    best = [math.inf] * n
    end = math.inf
    for a, b, _ in sorted(dag.edges, key=lambda e: (e[0] if e[0] >= 0 else -1)):
        base = 0 if a == START else best[a]
        if b == END:
            end = min(end, base)
        else:
            best[b] = min(best[b], base + pdfs.num_states(dag.phones[b]))
    return int(end)

