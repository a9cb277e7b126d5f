"""What ``prepare align`` writes: the alignment directory that ``prepare lang`` reads.

``OUT/phones.txt``; per split ``OUT/<split>/ali.{ark,scp}`` (a phone id per frame, as
the synthesizer writes them), ``phone.ctm`` (each phone's start and length: two equal
phones in a row stay two), ``state.{ark,scp}`` (the HMM state of every frame),
``pdf.{ark,scp}`` (the final model's pdf of every frame: the aligner's tree leaves, the
classes Kaldi's LDA+MLLT and ``prepare fmllr --ali`` take) and the split's ``text``; ``failed.txt`` lists every utterance left out with its reason. Each
alignment job writes its own arks (``ali.<job>.ark``, as Kaldi's ``ali.<job>.gz``); the
scp files, merged in utterance order, are written last and atomically, so a split whose
``ali.scp`` exists is complete.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from asrtrain.adapt.featio import write_int_vectors
from asrtrain.align.aligner import Alignment
from asrtrain.align.evaluate import FRAME_SHIFT, OFFSET
from asrtrain.core.atomic import atomic_open, write_text

#: ``prepare align``'s command record in its output dir (the dict, the splits, the rungs).
ALIGN_RECORD = "prepare-align.config.yaml"


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


def write_part(out: Path, split: str, part: int | str, alignments: dict[str, Alignment],
               names: dict[int, str]) -> None:
    """One job's alignments: ``<table>.<part>.{ark,scp}`` and ``phone.<part>.ctm``, each
    sorted by utterance (:func:`write_split` merges the parts)."""
    d = out / split
    d.mkdir(parents=True, exist_ok=True)
    utts = sorted(alignments)
    write_text(d / f"phone.{part}.ctm", ctm_text({u: alignments[u] for u in utts}, names))
    for table, field in TABLES:    # the suffix is replaced: <table>.<part>.{ark,scp}
        write_int_vectors(d / f"{table}.{part}.ark", ((u, getattr(alignments[u], field))
                                                      for u in utts))


def write_split(out: Path, split: str, parts: int | Sequence[str], text: dict[str, list[str]],
                failed: dict[str, str]) -> int:
    """Everything of one split from its jobs' ``parts`` (:func:`write_part`; a count means
    parts 1 … n): the tables' scp files and ``phone.ctm`` merged in utterance order (no part
    read whole), ``text`` and ``failed.txt``; ``ali.scp`` last. Returns the utterances aligned."""
    import heapq

    d = out / split
    ids = [str(i) for i in range(1, parts + 1)] if isinstance(parts, int) else list(parts)
    entries: dict[str, list[str]] = {}
    for table, _ in TABLES:
        lines = [ln for i in ids for ln in _lines(d / f"{table}.{i}.scp")]
        entries[table] = sorted(lines, key=_utt)
    utts = [_utt(ln) for ln in entries["ali"]]
    write_text(d / "text", "".join(f"{u} {' '.join(text[u])}\n" for u in utts))
    ctms = [open(d / f"phone.{i}.ctm", encoding="utf-8") for i in ids]
    try:
        with atomic_open(d / "phone.ctm", "w", encoding="utf-8") as fh:
            fh.writelines(heapq.merge(*ctms, key=_utt))
    finally:
        for f in ctms:
            f.close()
    write_text(d / "failed.txt", "".join(f"{u} {r}\n" for u, r in sorted(failed.items())))
    for table, _ in TABLES:               # ali last: a split whose ali.scp exists is complete
        write_text(d / f"{table}.scp", "".join(entries[table]))
    for i in ids:
        (d / f"phone.{i}.ctm").unlink()
        for table, _ in TABLES:
            (d / f"{table}.{i}.scp").unlink()
    return len(utts)


#: The tables of a split and the field of an Alignment each holds (``ali``: the phones).
TABLES = (("state", "state"), ("pdf", "pdf"), ("ali", "phone"))


def _utt(line: str) -> str:
    return line.split(" ", 1)[0]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)
