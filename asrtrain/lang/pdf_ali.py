"""Phone alignments → pdf alignments: the training targets of the archive.

Each phone segment is split uniformly into its HMM states (the same split the
topology and the tree were estimated with) and each frame takes the pdf of its
(left, phone, right, state).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines
from asrtrain.lang.hmm import segments, state_split
from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.lang.pdf_ali")


def phone_to_pdf(ali: np.ndarray, tree: ContextTree, utt: str = "?", cuts: Sequence[int] = ()
                 ) -> np.ndarray:
    """The pdf id of every frame of one utterance's phone alignment."""
    out = np.empty(len(ali), dtype=np.int32)
    segs = segments(ali, cuts)
    for i, (phone, start, n) in enumerate(segs):
        s_count = tree.topo.num_states.get(phone)
        if s_count is None:
            raise InputError(f"utterance {utt}: phone id {phone} at frame {start} is not in the tree")
        left = segs[i - 1][0] if i > 0 else 0
        right = segs[i + 1][0] if i + 1 < len(segs) else 0
        states = state_split(n, s_count)
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


def read_split(ali_dir: Path, split: str) -> Iterator[tuple[str, np.ndarray, list[int]]]:
    """``(utt, phone ids, CTM cuts)`` of a corpus split (no cuts without phone.ctm)."""
    ctm = Path(ali_dir) / split / "phone.ctm"
    cuts = read_ctm_cuts(ctm) if ctm.exists() else {}
    for utt, ali in read_alignments(Path(ali_dir) / split / "ali.scp"):
        yield utt, ali, cuts.get(utt, [])


def read_alignments(scp: Path) -> Iterator[tuple[str, np.ndarray]]:
    """``(utt, int array)`` of a kaldiio ali.scp, in file order, errors naming the file."""
    import kaldiio

    if not Path(scp).exists():
        raise InputError("alignment scp not found", scp)
    try:
        for utt, ali in kaldiio.load_scp_sequential(str(scp)):
            yield utt, np.asarray(ali).astype(np.int64).reshape(-1)
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"cannot read alignments: {exc}", scp) from None


def write_pdf_alignments(ali_dir: Path, split: str, tree: ContextTree, out_prefix: Path) -> int:
    """Write ``out_prefix.ark``/``.scp`` with the pdf alignment of every utterance."""
    from asrtrain.adapt.featio import write_int_vectors

    n = write_int_vectors(out_prefix, ((utt, phone_to_pdf(ali, tree, utt, cuts))
                                       for utt, ali, cuts in read_split(ali_dir, split)))
    log.info("%s: %d pdf alignments", out_prefix.with_suffix(".scp"), n)
    return n
