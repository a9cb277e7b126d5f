"""Words, pdfs and word times from the decoder's best path.

The best path is a linear lattice: one arc per frame (input label pdf+1) plus
epsilon-input arcs, with the words on the output side wherever determinization put
them. A pdf names its phone and HMM state (the tree never ties across them), so the
path gives the phone segments; splitting the non-silence phones into the words'
pronunciations (the lexicon) gives each word's first and last frame exactly. When
that split is ambiguous or impossible, the word starts where its label sits.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines

FRAME_SHIFT = 0.01


@dataclass
class BestPath:
    """Per frame the pdf; per output word its id and the frame its label sits at."""

    pdfs: list[int]
    words: list[int]
    word_frames: list[int]
    cost: float


def read_best_path(lattice) -> BestPath:  # lattice: kaldifst.Lattice (linear)
    """Walk the linear best-path lattice from its start state (through its text form)."""
    arcs: dict[int, tuple[int, int, int, float]] = {}
    finals: dict[int, float] = {}
    for line in lattice.to_str().splitlines():
        p = line.split()
        if len(p) >= 4:
            w = sum(float(x) for x in p[4].split(",")) if len(p) > 4 else 0.0
            arcs[int(p[0])] = (int(p[1]), int(p[2]), int(p[3]), w)
        elif p:
            finals[int(p[0])] = sum(float(x) for x in p[1].split(",")) if len(p) > 1 else 0.0
    pdfs: list[int] = []
    words: list[int] = []
    frames: list[int] = []
    state, cost = int(lattice.start), 0.0
    for _ in range(len(arcs)):
        if state not in arcs:
            break
        nxt, ilabel, olabel, w = arcs[state]
        if olabel:
            words.append(olabel)
            frames.append(len(pdfs))
        if ilabel:
            pdfs.append(ilabel - 1)
        cost += w
        state = nxt
    return BestPath(pdfs=pdfs, words=words, word_frames=frames, cost=cost + finals.get(state, 0.0))


def phone_segments(pdfs: list[int], pdf_info: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """``(phone, first_frame, num_frames)``: a new phone where the phone changes or the
    HMM re-enters its first state (a phone repeated across a word boundary). Every phone
    starts in state 0 and no topology returns to it (Kaldi's silence moves back among
    states 1–3 within one phone), so "back to 0" and not "state decreased" marks a new one."""
    segs: list[list[int]] = []
    prev_phone, prev_state = -1, -1
    for t, pdf in enumerate(pdfs):
        phone, state = pdf_info[pdf]
        if phone != prev_phone or (state == 0 and prev_state > 0):
            segs.append([phone, t, 0])
        segs[-1][2] += 1
        prev_phone, prev_state = phone, state
    return [(a, b, c) for a, b, c in segs]


def read_align_lexicon(path: Path, phone_ids: dict[str, int]) -> dict[str, list[tuple[int, ...]]]:
    """word → its pronunciations as phone-id tuples."""
    prons: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if len(parts) >= 2:
            unknown = [p for p in parts[1:] if p not in phone_ids]
            if unknown:
                raise InputError(f"line {n}: phone {unknown[0]!r} of {parts[0]!r} is not in the "
                                 "graph's phones.txt (lexicon and graph from different lang dirs?)", path)
            prons[parts[0]].append(tuple(phone_ids[p] for p in parts[1:]))
    return dict(prons)


def word_spans(words: list[str], phones: list[tuple[int, int, int]],
               prons: dict[str, list[tuple[int, ...]]]) -> list[tuple[int, int]] | None:
    """(first frame, frames) per word by splitting the phone string into pronunciations."""
    seq = [p for p, _, _ in phones]
    n, k = len(seq), len(words)
    # reach[i][m]: words[:i] cover seq[:m]; back[i][m]: where word i-1 started
    back: list[dict[int, int]] = [dict() for _ in range(k + 1)]
    back[0][0] = -1
    for i, w in enumerate(words):
        for m in back[i]:
            for pron in prons.get(w, ()):
                e = m + len(pron)
                if e <= n and tuple(seq[m:e]) == pron and e not in back[i + 1]:
                    back[i + 1][e] = m
    if n not in back[k]:
        return None
    spans: list[tuple[int, int]] = []
    end = n
    for i in range(k, 0, -1):
        start = back[i][end]
        first, last = phones[start], phones[end - 1]
        spans.append((first[1], last[1] + last[2] - first[1]))
        end = start
    return spans[::-1]


def ctm_lines(utt: str, path: BestPath, words: dict[int, str],
              pdf_info: list[tuple[int, int]] | None, silence: set[int],
              prons: dict[str, list[tuple[int, ...]]]) -> list[str]:
    """CTM lines ``utt 1 start dur WORD`` of one utterance (times: :func:`word_times`)."""
    return [f"{utt} 1 {s * FRAME_SHIFT:.2f} {d * FRAME_SHIFT:.2f} {w}"
            for w, s, d in word_times(path, words, pdf_info, silence, prons)]


def word_times(path: BestPath, words: dict[int, str], pdf_info: list[tuple[int, int]] | None,
               silence: set[int], prons: dict[str, list[tuple[int, ...]]]
               ) -> list[tuple[str, int, int]]:
    """``(word, first frame, frames)`` of each word of the best path.

    ``pdf_info`` gives (phone, HMM state) per input label − 1 (a pdf, or a Kaldi
    transition-id); None when unknown (a Kaldi graph without phones in its map, or
    without ``phones/align_lexicon.int``): then every word spans from the frame where
    its label is emitted to the next word's (an approximation: determinization moves
    labels, so a word may start a few frames early or late, and trailing silence counts
    towards the last word)."""
    names = [words.get(w, f"#{w}") for w in path.words]
    if not names:
        return []
    spans = None
    if pdf_info is not None:
        segs = [s for s in phone_segments(path.pdfs, pdf_info) if s[0] not in silence]
        spans = word_spans(names, segs, prons)
    if spans is None:  # fall back on the label positions
        starts = path.word_frames
        ends = starts[1:] + [len(path.pdfs)]
        spans = [(s, max(e - s, 1)) for s, e in zip(starts, ends, strict=True)]
    return [(w, s, d) for w, (s, d) in zip(names, spans, strict=True)]
