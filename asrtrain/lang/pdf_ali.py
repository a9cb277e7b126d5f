"""Frame alignments → pdf alignments: the training targets of the archive.

Each frame takes the pdf of its (left, phone, right, state). The states are the
aligner's where it wrote them (``<split>/state.scp``, targets ``states``); a phone-only
alignment (the synthesizer's, or targets ``even``) splits each phone uniformly into its
states. The topology and the tree are estimated on the same states as the targets.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines, text_stream
from asrtrain.lang.hmm import Alignment, FrameAlignment, as_frames
from asrtrain.lang.targets import uses_states
from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.lang.pdf_ali")


def phone_to_pdf(item: Alignment, tree: ContextTree, utt: str = "?") -> np.ndarray:
    """The pdf id of every frame of one utterance's alignment (phones alone, with their
    CTM cuts, or a :class:`FrameAlignment` with the aligner's states)."""
    ali = as_frames(item)
    out = np.empty(len(ali.phones), dtype=np.int32)
    segs = ali.segments()
    for i, (phone, start, n) in enumerate(segs):
        s_count = tree.topo.num_states.get(phone)
        if s_count is None:
            raise InputError(f"utterance {ali.utt if utt == '?' else utt}: phone id {phone} "
                             f"at frame {start} is not in the tree")
        left = segs[i - 1][0] if i > 0 else 0
        right = segs[i + 1][0] if i + 1 < len(segs) else 0
        states = ali.segment_states(phone, start, n, s_count)
        table = [tree.pdf(left, phone, right, s) for s in range(s_count)]
        out[start:start + n] = np.asarray(table, dtype=np.int32)[states]
    return out


def read_ctm_cuts(ctm: Path, frame_shift: float = 0.01, centre: float = 0.0125
                  ) -> dict[str, list[int]]:
    """First frame of every phone of a phone CTM (frame t's centre is t·shift + centre)."""
    cuts: dict[str, list[int]] = {}
    for n, line in enumerate(read_lines(ctm), 1):
        parts = line.split()
        if not parts:
            continue
        try:
            start = float(parts[2])
        except (IndexError, ValueError):
            raise InputError(f"line {n}: expected 'utt channel start dur phone'", ctm) from None
        cuts.setdefault(parts[0], []).append(max(0, math.ceil((start - centre) / frame_shift - 1e-6)))
    return cuts


def read_split(ali_dir: Path, split: str, targets: str = "auto") -> Iterator[FrameAlignment]:
    """The alignments of a corpus split in ali.scp's order: phones, CTM cuts and, per
    :func:`uses_states`, the aligner's states (one of the two must say where phones start)."""
    d = Path(ali_dir) / split
    with_states = uses_states(ali_dir, split, targets)
    check_phone_starts(d, with_states)
    cuts = read_ctm_cuts(d / "phone.ctm") if (d / "phone.ctm").exists() else {}
    states = dict(read_alignments(d / "state.scp")) if with_states else None
    for utt, ali in read_alignments(d / "ali.scp"):
        st = None
        if states is not None:
            st = states.get(utt)
            if st is None or len(st) != len(ali):
                problem = "missing" if st is None else f"{len(st)} frames, ali.scp has {len(ali)}"
                raise InputError(f"utterance {utt}: HMM states {problem}", d / "state.scp")
        yield FrameAlignment(ali, cuts.get(utt, []), st, utt)


def check_phone_starts(split_dir: Path, with_states: bool) -> None:
    """Refuse alignments that cannot say where each phone starts. A phone per frame cannot
    show two equal phones in a row ("bus stop": s s); phone.ctm can, and so can the aligner's
    states (state 2 then state 0). Guessing would merge them: the tree, the targets and the
    learned pronunciations would all rest on the guess."""
    if with_states or (split_dir / "phone.ctm").exists():
        return
    raise InputError("not found, and no aligner's states (state.scp) to use instead: without each "
                     "phone's start two equal phones in a row merge into one, and the tree, the "
                     "targets and the learned pronunciations would rest on guessed boundaries; write "
                     "it (Kaldi: ali-to-phones --ctm-output)", split_dir / "phone.ctm")


def read_alignments(scp: Path) -> Iterator[tuple[str, np.ndarray]]:
    """``(utt, int array)`` of a kaldiio ali.scp, in file order, errors naming the file."""
    import kaldiio

    if not Path(scp).exists():
        raise InputError("alignment scp not found", scp)
    done = 0
    try:
        for utt, ali in kaldiio.load_scp_sequential(text_stream(scp)):
            done += 1
            yield utt, np.asarray(ali).astype(np.int64).reshape(-1)
    except Exception as exc:  # kaldiio raises many kinds on bad data: say them in words
        raise InputError(f"cannot read alignments: {_where_stopped(scp, done, exc)}", scp) from None


def _where_stopped(scp: Path, done: int, exc: Exception) -> str:
    """The entry a sequential read failed on and why (a truncated ark named as such)."""
    from asrtrain.data.kaldi_read import failure, nth_entry

    stopped = nth_entry(scp, done)
    if stopped is None:
        return failure(None, exc)
    utt, entry = stopped
    return f"utterance {utt!r} ({entry}): {failure(entry, exc)}"


def write_pdf_alignments(ali_dir: Path, split: str, tree: ContextTree, out_prefix: Path,
                         targets: str = "auto") -> int:
    """Write ``out_prefix.ark``/``.scp`` with the pdf alignment of every utterance."""
    from asrtrain.adapt.featio import write_int_vectors

    n = write_int_vectors(out_prefix, ((ali.utt, phone_to_pdf(ali, tree))
                                       for ali in read_split(ali_dir, split, targets)))
    log.info("%s: %d pdf alignments (%s)", out_prefix.with_suffix(".scp"), n,
             "the aligner's HMM states" if uses_states(ali_dir, split, targets) else "even split")
    return n
