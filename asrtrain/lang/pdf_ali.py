"""Phone alignments → pdf alignments: the training targets of the archive.

Each phone segment is split uniformly into its HMM states (the same split the
topology and the tree were estimated with) and each frame takes the pdf of its
(left, phone, right, state).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from asrtrain.core.errors import InputError
from asrtrain.lang.hmm import segments, state_split
from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.lang.pdf_ali")


def phone_to_pdf(ali: np.ndarray, tree: ContextTree, utt: str = "?") -> np.ndarray:
    """The pdf id of every frame of one utterance's phone alignment."""
    out = np.empty(len(ali), dtype=np.int32)
    segs = segments(ali)
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


def write_pdf_alignments(ali_scp: Path, tree: ContextTree, out_prefix: Path) -> int:
    """Write ``out_prefix.ark``/``.scp`` with the pdf alignment of every utterance."""
    import kaldiio

    from asrtrain.core.atomic import atomic_path

    ark, scp = out_prefix.with_suffix(".ark"), out_prefix.with_suffix(".scp")
    n = 0
    with atomic_path(ark) as tmp_ark, atomic_path(scp) as tmp_scp:
        with kaldiio.WriteHelper(f"ark,scp:{tmp_ark},{tmp_scp}") as writer:
            for utt, ali in read_alignments(ali_scp):
                writer(utt, phone_to_pdf(ali, tree, utt))
                n += 1
        # the scp names the temporary ark: point it at the final name
        text = Path(tmp_scp).read_text(encoding="utf-8").replace(str(tmp_ark), str(ark.resolve()))
        Path(tmp_scp).write_text(text, encoding="utf-8")
    log.info("%s: %d pdf alignments", scp, n)
    return n
