"""``asrtrain decode --lattices``: one lattice search per utterance, then the grid swept
on the lattices.

Each job scores its utterances once, searches each at the acoustic scale ``--acwt``
(``latgen.py``: beam, max-active and lattice beam as Kaldi's latgen-faster) and writes
the lattices to ``OUT/lat/lat.<job>.gz`` (Kaldi's binary CompactLattice archive,
``lattice_io.py``; ``lattice-copy "ark:gunzip -c OUT/lat/lat.0.gz|" ark,t:-`` prints
them). Once every job is done, the hyps and CTMs of every (LM weight, penalty) come
from the lattices (``lattice_sweep.write_sweep``), so the grid costs one search, not one
per setting. An utterance whose search keeps no token gets an empty lattice (0 states)
and an empty hypothesis, counted, as the one-best decoder does.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from asrtrain.decode.job import (
    DecodeConfig,
    JobStats,
    job_dir,
    job_log,
    open_inputs,
    score_utterance,
)
from asrtrain.decode.lattice import WordLattice

log = logging.getLogger("asrtrain.decode")


def lattice_archive(out: Path, job: int) -> Path:
    """Where job ``job`` writes its lattices."""
    return Path(out) / "lat" / f"lat.{job}.gz"


def run_lattice_job(job: int, utts: list[str], cfg: DecodeConfig,
                    progress: Any = None) -> JobStats:
    """Score and search ``utts``; write the lattices."""
    from asrtrain.core.atomic import write_text
    from asrtrain.decode.latgen import LatticeDecoder, SearchOptions
    from asrtrain.decode.lattice_io import write_archive

    handler = job_log(cfg.out, job)
    try:
        _graph, tmap, scorer = open_inputs(cfg)
        opts = SearchOptions(beam=cfg.beam, max_active=cfg.max_active,
                             lattice_beam=cfg.lattice_beam)
        part = job_dir(cfg, job)
        part.mkdir(parents=True, exist_ok=True)
        decoder = LatticeDecoder(cfg.graph / "HCLG.fst", opts, workdir=part)
        columns = decoder.columns(scorer.num_pdfs, None if tmap is None else tmap.pdf)
        stats = JobStats()
        entries = _lattices(utts, cfg, scorer, decoder, columns, stats, progress)
        write_archive(lattice_archive(cfg.out, job), entries)
        write_text(part / "stats.json", json.dumps(asdict(stats)) + "\n")
        log.info("job %d: %d utterances, %d frames, scoring %.2fs, lattice search %.2fs; "
                 "lattices of %d states, %d arcs", job, stats.utterances, stats.frames,
                 stats.score_seconds, stats.decode_seconds, stats.lattice_states,
                 stats.lattice_arcs)
        return stats
    finally:
        logging.getLogger("asrtrain").removeHandler(handler)
        handler.close()


def _lattices(utts: list[str], cfg: DecodeConfig, scorer: Any, decoder: Any, columns: Any,
              stats: JobStats, progress: Any) -> Iterator[tuple[str, WordLattice]]:
    """Each utterance's lattice, in order, with the job's figures counted as they come."""
    from asrtrain.decode.latgen import SearchFailed

    for utt in utts:
        scores = score_utterance(utt, scorer, cfg, stats)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            lat, info = decoder.decode(scores, cfg.acwt, columns, utt)
        except SearchFailed as exc:
            stats.failed.append(utt)
            log.warning("utterance %s: %s; empty lattice and hypothesis", utt, exc.reason)
            lat, info = WordLattice.from_arcs(0, 0, [], {}), None
        stats.decode_seconds += time.perf_counter() - t0
        stats.decode_cpu_seconds += time.process_time() - c0
        if info is not None:
            if not info.reached_final:
                stats.not_final += 1
                log.warning("utterance %s: no final state reached; lattice of the last frame's "
                            "states", utt)
            stats.lattice_states += lat.num_states
            stats.lattice_arcs += lat.num_arcs
            stats.raw_lattice_arcs += info.raw_arcs
            stats.beam_reductions += info.beam_reductions
            if info.beam_reductions:
                log.warning("utterance %s: lattice determinization narrowed its beam %d times "
                            "(the lattice grew too large)", utt, info.beam_reductions)
        if progress is not None:
            progress(1)
        yield utt, lat


def remove_stale_lattices(out: Path, nj: int) -> None:
    """Remove lattice archives of jobs ``nj`` and above (an earlier decode's, with more
    jobs or one-best hyps now): ``rescore`` reads ``lat.0.gz``, ``lat.1.gz``, … as one decode."""
    for path in sorted((Path(out) / "lat").glob("lat.*.gz")):
        job = path.name[len("lat."):-len(".gz")]
        if not (job.isdigit() and int(job) < nj):
            log.warning("removing %s of an earlier decode (not a job of this one)", path)
            path.unlink()


def read_lattices(out: Path, nj: int) -> Iterator[tuple[str, WordLattice]]:
    """Every lattice of a decode, in job (utterance) order."""
    from asrtrain.decode.lattice_io import read_archive

    for job in range(nj):
        yield from read_archive(lattice_archive(out, job))


def sweep(cfg: DecodeConfig, graph: Any, tmap: Any, nj: int) -> dict[str, Any]:
    """Hyps and CTMs of every grid setting from the lattices; the sweep's figures."""
    from asrtrain.decode.lattice_sweep import write_sweep

    t0, c0 = time.perf_counter(), time.process_time()
    stats = write_sweep(read_lattices(cfg.out, nj), graph, graph.label_info(tmap), cfg.lmwts,
                        cfg.wips, cfg.out)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    log.info("LM-weight sweep on the lattices: %d settings, %d utterances, %.2fs (%.2fs CPU)",
             stats.settings, stats.utterances, wall, cpu)
    return {"sweep_seconds": wall, "sweep_cpu_seconds": cpu, "sweep_no_path": stats.no_path}


def lattice_figures(stats: list[Any], sweep_figures: dict[str, Any], audio: float
                    ) -> dict[str, Any]:
    """Real-time factors of the lattice decode (one core per job) and lattice sizes."""
    frames = sum(s.frames for s in stats) or 1
    search = sum(s.decode_cpu_seconds for s in stats)
    arcs = sum(s.lattice_arcs for s in stats)
    figures = {
        "rtf_lattice_search": search / audio if audio else None,
        "rtf_sweep": sweep_figures["sweep_cpu_seconds"] / audio if audio else None,
        "rtf_decode_total": (search + sweep_figures["sweep_cpu_seconds"]) / audio if audio else None,
        "lattice_arcs_per_frame": arcs / frames,
        "lattice_states_per_frame": sum(s.lattice_states for s in stats) / frames,
        "raw_lattice_arcs_per_frame": sum(s.raw_lattice_arcs for s in stats) / frames,
        "lattice_beam_reductions": sum(s.beam_reductions for s in stats),
        **sweep_figures,
    }
    log.info("lattices: search %.4f x real time (one core), sweep %.4f, together %.4f; %.2f arcs "
             "per frame (raw %.1f)", figures["rtf_lattice_search"] or 0.0,
             figures["rtf_sweep"] or 0.0, figures["rtf_decode_total"] or 0.0,
             figures["lattice_arcs_per_frame"], figures["raw_lattice_arcs_per_frame"])
    return figures
