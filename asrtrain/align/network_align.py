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
from asrtrain.core.errors import AsrtrainError, InputError
from asrtrain.core.progress import Progress
from asrtrain.core.textio import read_text
from asrtrain.core.workers import split_by_frames
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
    tree = ContextTree.read(lang / "tree")
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
                  beams: Beams | None = None, max_lost: float = 0.05, nj: int = 1
                  ) -> dict[str, Any]:
    """Write ``out``: the splits of ``archives`` (name → the archive the network reads) aligned
    by ``model`` on ``lang``'s tree, their transcripts and pronunciations those of ``ali_dir``
    (``prepare align``'s output), in ``nj`` local processes. Returns the figures per split."""
    check_out_path(out)
    record = read_record(ali_dir / ALIGN_RECORD)
    data = _split_dirs(record)
    unknown = sorted(set(archives) - set(data))
    if unknown:
        raise InputError(f"no split {unknown[0]!r} in the alignment dir (it has "
                         f"{', '.join(data)})", ali_dir / ALIGN_RECORD)
    lex = read_dict_dir(Path(record["dict_dir"]), ali_dir / "phones.txt")
    tree, _ = lang_tree(lang)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ali_dir / "phones.txt", out / "phones.txt")
    figures: dict[str, Any] = {}
    for name, archive in archives.items():
        job = Job(model, archive, lang, tree.num_pdfs, ali_dir / name / "ali.scp", out, name,
                  {i: p for p, i in lex.phones.items()}, beams or Beams())
        split = load_split(name, data[name], lex, pron_table(lex), record.get("oov"))
        figures[name] = _align_split(job, split, data[name], max_lost, nj).as_dict()
    return figures


def _split_dirs(record: dict[str, Any]) -> dict[str, Path]:
    """Each split's data dir (transcripts), as ``prepare align`` was given them."""
    dirs = {"train": Path(record["train"])}
    for spec in record.get("splits") or []:
        name, _, path = str(spec).partition("=")
        dirs[name] = Path(path)
    return dirs


@dataclass
class Job:
    """What a realignment job needs to align its share of a split (sent to a process)."""

    model: Path
    archive: Path
    lang: Path
    num_pdfs: int
    old_scp: Path         # the ladder's alignments of the split, to count what moved
    out: Path
    split: str
    names: dict[int, str]
    beams: Beams


@dataclass
class JobResult:
    figures: SplitFigures
    failed: dict[str, str]
    parts: list[str]


def _align_split(job: Job, split: Any, data: Path, max_lost: float, nj: int) -> SplitFigures:
    """Align one split in ``nj`` jobs (each writing its own parts), merge, refuse or report."""
    from asrtrain.decode.loglikes import ModelScorer

    scorer = ModelScorer(job.model, job.archive, job.num_pdfs)
    check_model_tree(scorer.final.meta, job.lang, job.model)
    dags = split.prons.dags(split.text, split.transcribed, data / "text")
    failures: Failures = split.failures
    frames = dict(scorer.utterances())
    for utt in dags:
        if utt not in frames:
            failures.add(utt, "not in the archive")
    utts = [(u, n) for u, n in scorer.utterances() if u in dags]
    shares = [s for s in split_by_frames(utts, max(1, min(nj, len(utts)))) if s]
    results = _run_jobs(job, shares, dags, scorer, sum(n for _, n in utts))
    fig, parts = SplitFigures(), []
    for res in results:
        fig.aligned += res.figures.aligned
        fig.frames += res.figures.frames
        fig.phone_changed += res.figures.phone_changed
        failures.reasons.update(res.failed)
        parts += res.parts
    if not parts:   # nothing aligned: one empty part, so the split's files exist
        write_part(job.out, job.split, "1", {}, job.names)
        parts = ["1"]
    fig.lost = failures.counts()
    total = len(split.utts.feats) + len(split.utts.missing_text)
    n_lost = sum(fig.lost.values())
    if n_lost > max_lost * total:
        (job.out / job.split).mkdir(parents=True, exist_ok=True)
        write_text(job.out / job.split / "failed.txt",
                   "".join(f"{u} {r}\n" for u, r in sorted(failures.reasons.items())))
        raise InputError(f"{n_lost} of {total} utterances of {job.split} could not be aligned "
                         f"by the network (more than --max-lost {max_lost:g}); see "
                         f"{job.out / job.split / 'failed.txt'}", data)
    write_split(job.out, job.split, parts, split.text, failures.reasons)
    log.info("%s: %d utterances aligned by the network in %d job(s), %d lost%s; %.1f%% of %d "
             "frames on another phone than the ladder's", job.split, fig.aligned, len(shares),
             n_lost, f" ({fig.lost})" if n_lost else "",
             100.0 * fig.phone_changed / max(fig.frames, 1), fig.frames)
    return fig


#: Frames a job must hold to be worth a process of its own (it loads torch and the model
#: again, seconds); smaller shares run one after another here, with the same parts.
SPAWN_MIN_FRAMES = 50_000


def _run_jobs(job: Job, shares: list[list[str]], dags: dict[str, PhoneDag], scorer: Any,
              frames: int) -> list[JobResult]:
    from asrtrain.core.workers import run_workers

    work = [(i, {u: dags[u] for u in share}) for i, share in enumerate(shares)]
    with Progress(f"{job.split}: network alignment", float(sum(map(len, shares))),
                  unit="utts") as bar:
        if len(shares) <= 1 or frames < SPAWN_MIN_FRAMES * len(shares):
            return [align_share(job, i, share, bar.advance, scorer) for i, share in work]
        try:
            return run_workers(_worker, [(job, i, share) for i, share in work], len(work),
                               on_message=lambda _i, n: bar.advance(n),
                               names=[f"realign job {i}" for i in range(len(work))])
        except AsrtrainError as exc:
            raise InputError(f"{exc}", job.out / job.split) from None


def _worker(job: Job, index: int, dags: dict[str, PhoneDag], report: Any) -> JobResult:
    """A spawned job: one core (torch would take them all), progress through ``report``."""
    import torch

    torch.set_num_threads(1)
    return align_share(job, index, dags, report)


def align_share(job: Job, index: int, dags: dict[str, PhoneDag], report: Any,
                scorer: Any = None) -> JobResult:
    """Align the utterances of ``dags`` (archive order), writing parts ``<index+1>.<k>`` of
    ``PART_UTTS`` each; the figures, the lost utterances and the parts written."""
    from asrtrain.decode.loglikes import ModelScorer

    scorer = scorer or ModelScorer(job.model, job.archive, job.num_pdfs)
    tree, loops = lang_tree(job.lang)
    pdfs, old = TreePdfs(tree), _old_phones(job.old_scp)
    failures, res = Failures(), JobResult(SplitFigures(), {}, [])
    got: dict[str, Alignment] = {}
    frames = dict(scorer.utterances())

    def flush() -> None:
        res.parts.append(f"{index + 1}.{len(res.parts) + 1}")
        write_part(job.out, job.split, res.parts[-1], got, job.names)
        got.clear()
    for utt, dag in dags.items():
        ali = _align_one(utt, dag, frames, scorer, pdfs, loops, job.beams, failures)
        if ali is not None:
            got[utt] = ali
            res.figures.aligned += 1
            _compare(ali, old.get(utt) if utt in old else None, res.figures)
        if len(got) == PART_UTTS:   # written in parts: a corpus's alignments never held whole
            flush()
        report(1)
    if got:
        flush()
    res.failed = failures.reasons
    return res


def _align_one(utt: str, dag: PhoneDag, frames: dict[str, int], scorer: Any, pdfs: TreePdfs,
               loops: Transitions, beams: Beams, failures: Failures) -> Alignment | None:
    """One utterance's alignment, or None with the reason recorded."""
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
