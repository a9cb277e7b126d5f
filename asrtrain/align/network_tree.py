"""A question tree of the network's own size, grown on the aligner's last rung (Kaldi's
``steps/nnet3/chain/build_tree.sh``).

The ladder's tree is sized for Gaussians (``FRAMES_PER_LEAF`` frames a leaf, 1,080 leaves on
speechocean762's 2.7 h); a network's softmax shares its parameters across pdfs and can use
more. Here the last rung realigns the training split (its own front end and, for SAT, the
training speakers' transforms), every context's frames are counted as the ladder counts them,
and ``lang/questions.py`` grows a tree of ``leaves`` on them. The result is written as a rung
file (one Gaussian a pdf) so that ``prepare lang --tree`` reads it as it reads ``sat.pt``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from asrtrain.align.feats import FrontEnd
from asrtrain.align.hmm import Transitions, TreePdfs
from asrtrain.align.ladder import LadderConfig, Rung, question_pdfs, single_gaussians
from asrtrain.align.output import ALIGN_RECORD
from asrtrain.align.run import load_split, save_rung
from asrtrain.align.saved import SavedRung, load_rung
from asrtrain.align.transcripts import pron_table
from asrtrain.core.config import read_record
from asrtrain.core.errors import InputError
from asrtrain.lang.lexicon import read_dict_dir

log = logging.getLogger("asrtrain.align")


def grow_network_tree(ali_dir: Path, leaves: int, out: Path, nj: int = 1) -> dict[str, Any]:
    """Write ``out`` (a rung file whose tree has about ``leaves`` pdfs); the figures."""
    record = read_record(ali_dir / ALIGN_RECORD)
    stage = str(record["stages"]).split(",")[-1]
    if stage == "mono":
        raise InputError("a network tree needs a context-dependent rung (the ladder stops at "
                         "mono)", ali_dir / ALIGN_RECORD)
    rung = load_rung(ali_dir / "models" / f"{stage}.pt")
    lex = read_dict_dir(Path(record["dict_dir"]), ali_dir / "phones.txt")
    split = load_split("train", Path(record["train"]), lex, pron_table(lex), record.get("oov"))
    front, trans = _front(rung), _transitions(rung)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # as prepare align: many small products
    try:
        with split.jobs(nj, None, "network tree") as jobs:
            jobs.use_front(front)
            jobs.realign(rung.model, TreePdfs(rung.tree), trans, LadderConfig().beams,
                         split.failures, "train: the rung's alignment", keep_previous=False)
            topo = jobs.topology(rung.tree.topo.num_states)   # the rung's phones and states
            pdfs = question_pdfs(jobs, topo, rung.tree.ci_phones, leaves)
            model = single_gaussians(pdfs.num_pdfs, jobs)
            aligned = jobs.aligned
    finally:
        torch.set_num_threads(threads)
    names = {i: p for p, i in lex.phones.items()}
    save_rung(out, Rung(stage, front, pdfs, model, trans), names)
    lost = split.failures.counts()
    figures = {"rung": stage, "pdfs": pdfs.num_pdfs, "aligned": aligned, "lost": lost}
    log.info("network tree %s: %d pdfs grown on the %s rung's alignments of %d utterances%s",
             out, pdfs.num_pdfs, stage, aligned,
             f" ({sum(lost.values())} not aligned)" if lost else "")
    return figures


def _front(rung: SavedRung) -> FrontEnd:
    """The rung's front end with the training speakers' transforms (SAT's own)."""
    front = FrontEnd(deltas=rung.front.deltas, context=rung.front.context, lda=rung.front.lda)
    front.fmllr = dict(rung.train_fmllr)
    return front


def _transitions(rung: SavedRung) -> Transitions:
    """The rung's self-loops, read back from its tree's topology."""
    return Transitions({(phone, s): row[s] for phone, rows in rung.tree.topo.trans.items()
                        for s, row in enumerate(rows)})
