"""What ``prepare align`` writes: the alignment directory that ``prepare lang`` reads.

``OUT/phones.txt``; per split ``OUT/<split>/ali.{ark,scp}`` (a phone id per frame, as
the synthesizer writes them), ``phone.ctm`` (each phone's start and length: two equal
phones in a row stay two), ``state.{ark,scp}`` (the HMM state of every frame),
``pdf.{ark,scp}`` (the final model's pdf of every frame: the aligner's tree leaves, the
classes Kaldi's LDA+MLLT and ``prepare fmllr --ali`` take) and the split's ``text``; ``failed.txt`` lists every utterance left out with its reason. The
scp files are written last and atomically, so a split whose ``ali.scp`` exists is
complete.
"""

from __future__ import annotations

from pathlib import Path

from asrtrain.adapt.featio import write_int_vectors
from asrtrain.align.aligner import Alignment
from asrtrain.align.evaluate import FRAME_SHIFT, OFFSET
from asrtrain.core.atomic import write_text


def check_out_path(out: Path) -> None:
    """Refuse an output dir whose path kaldiio cannot write tables into: its wspecifiers
    (``ark,scp:A,B``) split at ',' and ':'."""
    from asrtrain.core.errors import InputError

    if any(c in str(Path(out).resolve()) for c in ",:"):
        raise InputError("an output path with ',' or ':' cannot hold Kaldi tables "
                         "(ark,scp:A,B specifiers); choose another", out)


def ctm_text(alignments: dict[str, Alignment], names: dict[int, str]) -> str:
    """``utt 1 start dur phone`` per phone; a phone starting at frame b starts at
    b·10 ms + 7.5 ms, halfway between two frame centres (what ``prepare lang`` reads back)."""
    lines = []
    for utt, ali in alignments.items():
        for phone, start, frames in ali.segments():
            t0 = start * FRAME_SHIFT + OFFSET if start else 0.0
            t1 = (start + frames) * FRAME_SHIFT + OFFSET
            lines.append(f"{utt} 1 {t0:.4f} {t1 - t0:.4f} {names[phone]}")
    return "".join(f"{ln}\n" for ln in lines)


def write_split(out: Path, split: str, alignments: dict[str, Alignment],
                names: dict[int, str], text: dict[str, list[str]],
                failed: dict[str, str]) -> None:
    """Everything of one split; ``ali.scp`` last."""
    d = out / split
    d.mkdir(parents=True, exist_ok=True)
    utts = sorted(alignments)
    write_text(d / "text", "".join(f"{u} {' '.join(text[u])}\n" for u in utts))
    write_text(d / "phone.ctm", ctm_text({u: alignments[u] for u in utts}, names))
    write_text(d / "failed.txt", "".join(f"{u} {r}\n" for u, r in sorted(failed.items())))
    write_int_vectors(d / "state", ((u, alignments[u].state) for u in utts))
    write_int_vectors(d / "pdf", ((u, alignments[u].pdf) for u in utts))
    write_int_vectors(d / "ali", ((u, alignments[u].phone) for u in utts))
