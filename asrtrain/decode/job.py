"""What every decoding job shares: its config, its inputs checked against each other, its
stats, its directory and its log.

The one-best job (``decoder.run_job``) and the lattice job (``lattice_job.run_lattice_job``)
are peers built on this module; ``decoder.decode`` runs either. Keeping these here lets the
lattice job import them without importing the orchestrator that imports it.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.core.textio import read_text
from asrtrain.decode.graph_dir import GraphInfo, load_tid2pdf
from asrtrain.decode.grid import (
    DEFAULT_ACWT,
    DEFAULT_BEAM,
    DEFAULT_LATTICE_BEAM,
    DEFAULT_LMWT,
    DEFAULT_MAX_ACTIVE,
    DEFAULT_WIP,
    parse_lmwt,
    parse_wip,
)

log = logging.getLogger("asrtrain.decode")


@dataclass
class DecodeConfig:
    """Everything a decode job needs (picklable, for spawned jobs)."""

    graph: Path
    out: Path
    model: Path | None = None
    data: Path | None = None
    oracle: Path | None = None
    nj: int = 1
    acwt: float = DEFAULT_ACWT
    beam: float = DEFAULT_BEAM
    max_active: int = DEFAULT_MAX_ACTIVE
    lmwts: list[float] = field(default_factory=lambda: parse_lmwt(DEFAULT_LMWT, DEFAULT_ACWT))
    wips: list[float] = field(default_factory=lambda: parse_wip(DEFAULT_WIP))
    text: Path | None = None
    tid2pdf: Path | None = None
    lattices: bool = False  # one lattice search per utterance, the grid swept on the lattices
    lattice_beam: float = DEFAULT_LATTICE_BEAM
    first_pass: Path | None = None    # a GMM's first-pass decode: speaker transforms from it
    first_pass_lmwt: float | None = None  # its best path's LM weight (default 1/acwt)
    transforms: Path | None = None    # speaker fMLLR transforms (trans.scp) for a GMM
    context: int | None = None        # a network's context frames (None: loglikes.decode_context)
    ensemble: list[Path] = field(default_factory=list)  # more networks, scores averaged with MODEL's


def make_scorer(cfg: DecodeConfig, num_pdfs: int | None, tmap: Any = None):
    """The oracle scorer (``--oracle``) or the model scorer; ``num_pdfs`` None (a Kaldi
    graph without ``num_pdfs``): the model's outputs, or for the oracle the map's pdfs."""
    from asrtrain.decode.gmm_scorer import GmmScorer, is_features_dir
    from asrtrain.decode.loglikes import ModelScorer, OracleScorer

    if cfg.oracle is not None:
        if num_pdfs is None:
            num_pdfs = int(tmap.columns().max()) + 1
        return OracleScorer(cfg.oracle, num_pdfs)
    if cfg.model is None or cfg.data is None:
        raise ConfigError("decode needs MODEL and DATA (an archive), or --oracle ALI.scp")
    if is_features_dir(cfg.data):
        from asrtrain.decode.first_pass import read_transforms

        if cfg.ensemble:
            raise ConfigError("--ensemble averages networks' scores on an archive, not a GMM's")

        return GmmScorer(cfg.model, cfg.data, num_pdfs,
                         read_transforms(cfg.transforms) if cfg.transforms else None)
    if cfg.first_pass is not None or cfg.transforms is not None:
        raise ConfigError("--first-pass and --transforms adapt a GMM (DATA a features dir), "
                          "not a network")
    if cfg.ensemble:
        from asrtrain.decode.ensemble import EnsembleScorer

        return EnsembleScorer([cfg.model, *cfg.ensemble], cfg.data, num_pdfs, cfg.context)
    return ModelScorer(cfg.model, cfg.data, num_pdfs, cfg.context)


def open_inputs(cfg: DecodeConfig) -> tuple[GraphInfo, Any, Any]:
    """Graph, transition-id map (or None) and scorer, checked against each other."""
    from asrtrain.decode.kaldi_graph import check_tid2pdf

    graph = GraphInfo.load(cfg.graph)
    tmap = load_tid2pdf(cfg.tid2pdf, graph)
    scorer = make_scorer(cfg, graph.num_pdfs, tmap)
    if tmap is not None:
        check_tid2pdf(tmap, scorer.num_pdfs)
    return graph, tmap, scorer


def check_identity(cfg: DecodeConfig, graph: GraphInfo, scorer: Any, tmap: Any = None) -> None:
    """Refuse a graph built for another tree than the model's (or the alignments')."""
    from asrtrain.decode.kaldi_graph import check_tid2pdf, max_ilabel
    from asrtrain.decode.loglikes import model_tree_id

    top = max_ilabel(graph.path / "HCLG.fst") if tmap is not None else None
    if tmap is not None:
        check_tid2pdf(tmap, scorer.num_pdfs, top)
    if graph.kaldi:
        log.warning("%s is a Kaldi graph (no info.json): cannot verify that it was built for the "
                    "tree of the scores; %s and the model (or alignments) must come from the "
                    "same Kaldi model%s",
                    graph.path, cfg.tid2pdf, "" if top is not None else
                    " (a VectorFst or aligned ConstFst: input labels not checked against the map)")
        return
    if cfg.oracle is not None:
        marker = Path(cfg.oracle).parent / "tree_id"
        other = read_text(marker).strip() if marker.exists() else None
        what = f"the alignments {cfg.oracle}"
    elif hasattr(scorer, "rung"):   # a GMM: the graph's pdfs must be its pdfs
        check_gmm_graph(scorer.rung.tree, graph, cfg.model)
        return
    else:
        for member, path in zip(getattr(scorer, "members", [scorer]), [cfg.model, *cfg.ensemble], strict=True):
            _check_tree(model_tree_id(member.final.meta), f"the model {path}", graph)
        return
    _check_tree(other, what, graph)


def _check_tree(other: str | None, what: str, graph: GraphInfo) -> None:
    """Refuse ``what`` (made for tree ``other``) on a graph of another tree; warn when unknown."""
    if other is None:
        log.warning("cannot verify that %s and the graph share a tree (no tree id recorded)", what)
    elif other != graph.tree_id:
        raise InputError(f"the graph was built for tree {graph.tree_id}, {what} for tree {other}",
                         graph.path)


def check_gmm_graph(tree: Any, graph: GraphInfo, model: Any) -> None:
    """Refuse a GMM (of ``tree``, read from ``model``) on a graph whose pdf labels are another
    tree's: they would mean other states."""
    from asrtrain.decode.first_pass import pdf_map_id

    theirs, ours = graph_pdf_map_id(graph), pdf_map_id(tree)
    if theirs != ours:
        raise InputError(f"the graph's pdfs are those of tree {theirs}, the model {model}'s"
                         f" of tree {ours}: build its graph with prepare gmm-graph", graph.path)


def graph_pdf_map_id(graph: GraphInfo) -> str | None:
    """What the graph's pdf labels mean (None for a Kaldi graph)."""
    if graph.kaldi:
        return None
    return tree_pdf_map_id(graph.path / "tree")


def tree_pdf_map_id(path: Path) -> str:
    """What the pdfs of a tree file (a lang dir's or a graph's ``tree``) mean."""
    from asrtrain.decode.first_pass import pdf_map_id
    from asrtrain.lang.tree import ContextTree

    return pdf_map_id(ContextTree.from_json(json.loads(read_text(path))))


@dataclass
class JobStats:
    """What a job did and how long it took."""

    utterances: int = 0
    frames: int = 0
    score_seconds: float = 0.0
    decode_seconds: float = 0.0
    decode_cpu_seconds: float = 0.0
    penalty_seconds: float = 0.0
    not_final: int = 0
    failed: list[str] = field(default_factory=list)
    lattice_states: int = 0
    lattice_arcs: int = 0
    raw_lattice_arcs: int = 0
    beam_reductions: int = 0


def score_utterance(utt: str, scorer: Any, cfg: DecodeConfig, stats: JobStats) -> np.ndarray:
    """``utt``'s checked scores (model or oracle), counted in the job's stats."""
    from asrtrain.decode.loglikes import check_scores

    t0 = time.perf_counter()
    scores = check_scores(utt, scorer(utt), scorer.num_pdfs, cfg.model or cfg.oracle)
    stats.score_seconds += time.perf_counter() - t0
    stats.utterances += 1
    stats.frames += scores.shape[0]
    return scores


def job_dir(cfg: DecodeConfig, job: int) -> Path:
    """Where job ``job`` writes its parts before they are merged."""
    return cfg.out / f"split{cfg.nj}" / str(job)


def job_log(out: Path, job: int) -> logging.Handler:
    """``OUT/log/decode.<job>.log``, attached to asrtrain's logger for the job's life."""
    from asrtrain.core.runlog import LOG_FORMAT

    (out / "log").mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out / "log" / f"decode.{job}.log", mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger("asrtrain")
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    return handler
