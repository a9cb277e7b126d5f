"""Alignments by the trained network (Kaldi's ``steps/nnet3/align.sh``, nnet1's realignment).

The network's targets come from the GMM ladder's last rung; once trained, the network tells
the frames apart better than that GMM did (on speechocean762 it makes 21% fewer phone errors
on speech frames), so its own forced alignment of the training transcripts can be better
targets for the next network. Each utterance's graph is the aligner's (its transcript's
phone DAG with optional silence, expanded on the lang's tree and transitions), its scores
the decoder's (log posterior − log prior of ``final.pt`` on the utterance's archive chunks),
scaled by the aligner's acoustic scale, and the beams are the aligner's. The output is an
alignment directory as ``prepare align`` writes it (phones, HMM states, the lang's pdfs),
which ``prepare lang`` reads as it reads the ladder's.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.align.aligner import Alignment, align
from asrtrain.align.corpus import Beams, Failures
from asrtrain.align.graph import PhoneDag, expand
from asrtrain.align.hmm import Transitions, TreePdfs
from asrtrain.align.output import ALIGN_RECORD, check_out_path, write_part, write_split
from asrtrain.align.run import load_split
from asrtrain.align.transcripts import pron_table
from asrtrain.core.atomic import write_text
from asrtrain.core.config import read_record
from asrtrain.core.errors import InputError
from asrtrain.core.progress import Progress
from asrtrain.core.textio import read_text
from asrtrain.lang.lexicon import read_dict_dir
from asrtrain.lang.tree import ContextTree

log = logging.getLogger("asrtrain.align")

#: Utterances whose alignments are held before they are written as one part (``write_part``):
#: tens of MB of frames at 10 s an utterance; ``write_split`` merges the parts in order.
PART_UTTS = 2000


@dataclass
class SplitFigures:
    """What realigning one split did: aligned, lost by reason, and how far it moved."""

    aligned: int = 0
    lost: dict[str, int] = field(default_factory=dict)
    frames: int = 0
    phone_changed: int = 0   # frames whose phone differs from the ladder's alignment

    def as_dict(self) -> dict[str, Any]:
        return {"aligned": self.aligned, "lost": self.lost, "frames": self.frames,
                "phone_changed": self.phone_changed,
                "phone_agreement": 1.0 - self.phone_changed / max(self.frames, 1)}


def lang_tree(lang: Path) -> tuple[ContextTree, Transitions]:
    """The lang's tree and its topology's self-loops (what its HCLG and targets use)."""
    tree = ContextTree.from_json(json.loads(read_text(lang / "tree")))
    loops = Transitions({(phone, s): row[s] for phone, rows in tree.topo.trans.items()
                         for s, row in enumerate(rows)})
    return tree, loops


def check_model_tree(meta: dict[str, Any], lang: Path, model: Path) -> None:
    """Refuse a model trained on another tree than the lang's (its pdfs mean other states)."""
    from asrtrain.decode.loglikes import model_tree_id

    theirs = model_tree_id(meta)
    ours = read_text(lang / "tree_id").strip() if (lang / "tree_id").exists() else None
    if theirs and ours and theirs != ours:
        raise InputError(f"the model was trained on tree {theirs}, the lang has tree {ours}: "
                         "realign with the lang the model's archive was built from", model)


def network_align(model: Path, lang: Path, ali_dir: Path, archives: dict[str, Path], out: Path,
                  beams: Beams | None = None, max_lost: float = 0.05) -> dict[str, Any]:
    """Write ``out``: the splits of ``archives`` (name → the archive the network reads) aligned
    by ``model`` on ``lang``'s tree, their transcripts and pronunciations those of ``ali_dir``
    (``prepare align``'s output). Returns the figures per split."""
    from asrtrain.decode.loglikes import ModelScorer

    check_out_path(out)
    beams = beams or Beams()
    record = read_record(ali_dir / ALIGN_RECORD)
    data = _split_dirs(record)
    unknown = sorted(set(archives) - set(data))
    if unknown:
        raise InputError(f"no split {unknown[0]!r} in the alignment dir (it has "
                         f"{', '.join(data)})", ali_dir / ALIGN_RECORD)
    lex = read_dict_dir(Path(record["dict_dir"]), ali_dir / "phones.txt")
    tree, loops = lang_tree(lang)
    names = {i: p for p, i in lex.phones.items()}
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ali_dir / "phones.txt", out / "phones.txt")
    figures: dict[str, Any] = {}
    for name, archive in archives.items():
        scorer = ModelScorer(model, archive, tree.num_pdfs)
        check_model_tree(scorer.final.meta, lang, model)
        figures[name] = _align_split(name, data[name], ali_dir, scorer, tree, loops, beams,
                                     lex, record.get("oov"), out, names, max_lost).as_dict()
    return figures


def _split_dirs(record: dict[str, Any]) -> dict[str, Path]:
    """Each split's data dir (transcripts), as ``prepare align`` was given them."""
    dirs = {"train": Path(record["train"])}
    for spec in record.get("splits") or []:
        name, _, path = str(spec).partition("=")
        dirs[name] = Path(path)
    return dirs


def _align_split(name: str, data: Path, ali_dir: Path, scorer: Any, tree: ContextTree,
                 loops: Transitions, beams: Beams, lex: Any, oov: str | None, out: Path,
                 names: dict[int, str], max_lost: float) -> SplitFigures:
    split = load_split(name, data, lex, pron_table(lex), oov)
    dags = split.prons.dags(split.text, split.transcribed, data / "text")
    frames = dict(scorer.utterances())
    old = _old_phones(ali_dir / name / "ali.scp")
    failures, got, fig, parts = split.failures, {}, SplitFigures(), 0
    pdfs = TreePdfs(tree)
    with Progress(f"{name}: network alignment", float(len(dags)), unit="utts") as bar:
        for utt, dag in dags.items():
            ali = _align_one(utt, dag, frames, scorer, pdfs, loops, beams, failures)
            if ali is not None:
                got[utt] = ali
                fig.aligned += 1
                _compare(ali, old.get(utt) if utt in old else None, fig)
            if len(got) == PART_UTTS:   # written in parts: a corpus's alignments never held whole
                parts += 1
                write_part(out, name, parts, got, names)
                got = {}
            bar.advance()
    if got or not parts:
        parts += 1
        write_part(out, name, parts, got, names)
    fig.lost = failures.counts()
    total = len(split.utts.feats) + len(split.utts.missing_text)
    n_lost = sum(fig.lost.values())
    if n_lost > max_lost * total:
        (out / name).mkdir(parents=True, exist_ok=True)
        write_text(out / name / "failed.txt",
                   "".join(f"{u} {r}\n" for u, r in sorted(failures.reasons.items())))
        raise InputError(f"{n_lost} of {total} utterances of {name} could not be aligned by the "
                         f"network (more than --max-lost {max_lost:g}); see "
                         f"{out / name / 'failed.txt'}", data)
    write_split(out, name, parts, split.text, failures.reasons)
    log.info("%s: %d utterances aligned by the network, %d lost%s; %.1f%% of %d frames on "
             "another phone than the ladder's", name, fig.aligned, n_lost,
             f" ({fig.lost})" if n_lost else "", 100.0 * fig.phone_changed / max(fig.frames, 1),
             fig.frames)
    return fig


def _align_one(utt: str, dag: PhoneDag, frames: dict[str, int], scorer: Any, pdfs: TreePdfs,
               loops: Transitions, beams: Beams, failures: Failures) -> Alignment | None:
    """One utterance's alignment, or None with the reason recorded."""
    if utt not in frames:
        failures.add(utt, "not in the archive")
        return None
    graph = expand(dag, pdfs, loops.self_loop)
    if frames[utt] < graph.min_frames:
        failures.add(utt, "too short for its phones")
        return None
    scores = scorer(utt)
    got = align(graph, dag, scores[:, np.unique(graph.pdf)], beams.acwt, beams.beam,
                beams.retry_beam, last_beam=beams.last_beam)
    if got is None:
        failures.add(utt, "no path at the last beam")
    return got


def _old_phones(scp: Path) -> Any:
    """The ladder's per-frame phones of a split, read one utterance at a time (kaldiio's
    lazy table; empty where it wrote none)."""
    from asrtrain.data.kaldi_read import open_scp

    return open_scp(scp, "alignment scp") if scp.exists() else {}


def _compare(ali: Alignment, old: np.ndarray | None, fig: SplitFigures) -> None:
    fig.frames += len(ali.phone)
    if old is not None and len(old) == len(ali.phone):
        fig.phone_changed += int((np.asarray(old) != ali.phone).sum())
    else:
        fig.phone_changed += len(ali.phone)
