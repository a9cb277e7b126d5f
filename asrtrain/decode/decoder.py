"""``asrtrain decode``: Viterbi beam search on HCLG with kaldi-decoder, in parallel jobs.

Each job scores its utterances once (model or oracle) and runs kaldi-decoder's
FasterDecoder once per LM weight w with acoustic scale 1/w and per word insertion
penalty p on a copy of HCLG with p on every word arc (``penalty.py``): that is Kaldi's
``lattice-scale --inv-acoustic-scale=w | lattice-add-penalty --word-ins-penalty=p``
(graph costs weighted w against the acoustics, p per word) without lattices. On a Kaldi
graph (transition-id input labels) each LM weight first gathers the scaled pdf scores into
one column per transition-id (``--tid2pdf``). Jobs write their part under
``OUT/split<J>/<j>/`` and a log ``OUT/log/decode.<j>.log``; the parts are merged into ``OUT/hyp/<name>.txt`` and ``OUT/ctm/<name>.ctm`` once every job has
finished; names are ``<w>``, or ``<w>_<p>`` when penalties other than 0 are swept (``grid.py``).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict
from typing import Any

import numpy as np

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import ConfigError, InputError
from asrtrain.core.textio import read_text
from asrtrain.core.workers import split_by_frames
from asrtrain.decode.graph_dir import GraphInfo
from asrtrain.decode.grid import (
    lmwt_name,
    setting_name,
    settings,
    wip_name,
)
from asrtrain.decode.job import (
    DecodeConfig,
    JobStats,
    check_identity,
    graph_pdf_map_id,
    job_dir,
    job_log,
    open_inputs,
    score_utterance,
)
from asrtrain.decode.lattice_job import remove_stale_lattices
from asrtrain.decode.reference import copy_reference

log = logging.getLogger("asrtrain.decode")


def adapt_first(cfg: DecodeConfig, scorer: Any) -> dict[str, Any]:
    """With ``--first-pass``: the speakers' transforms, written to ``OUT/trans.scp`` and
    handed to the jobs; their figures."""
    from asrtrain.decode.first_pass import estimate_transforms, write_transforms

    if cfg.first_pass is None:
        if getattr(scorer, "rung", None) is not None and scorer.rung.name == "sat" \
                and cfg.transforms is None:
            log.warning("%s is a SAT model decoded without speaker transforms (no --first-pass "
                        "or --transforms): its features are speaker-independent, which it was "
                        "not trained on", cfg.model)
        return {}
    if not hasattr(scorer, "rung"):
        raise ConfigError("--first-pass adapts a GMM (DATA a features dir), not a network")
    if cfg.transforms is not None:
        raise ConfigError("give --first-pass or --transforms, not both")
    lmwt = cfg.first_pass_lmwt or 1.0 / cfg.acwt
    transforms, report = estimate_transforms(scorer, cfg.first_pass, lmwt)
    cfg.transforms = write_transforms(cfg.out, transforms)
    return {"first_pass": str(cfg.first_pass), "first_pass_lmwt": lmwt, **report.figures()}


def load_decoders(cfg: DecodeConfig, job: int, stats: JobStats) -> dict[float, Any]:
    """One FasterDecoder per penalty, each on its own copy of HCLG (``decode/penalty.py``):
    a job holds ``len(wips)`` graphs in memory, so each utterance is scored only once."""
    import kaldi_decoder

    from asrtrain.decode.penalty import penalized_hclg

    opts = kaldi_decoder.FasterDecoderOptions(beam=cfg.beam, max_active=cfg.max_active)
    decoders = {}
    for p in cfg.wips:
        t0 = time.perf_counter()
        fst = penalized_hclg(cfg.graph / "HCLG.fst", p, job_dir(cfg, job))
        decoders[p] = (kaldi_decoder.FasterDecoder(fst, opts), fst)  # the FST outlives its decoder
        stats.penalty_seconds += time.perf_counter() - t0
    return decoders


def run_job(job: int, utts: list[str], cfg: DecodeConfig, progress: Any = None) -> JobStats:
    """Score and decode ``utts``; write this job's hyps and CTMs (with ``cfg.lattices``
    its lattices instead, ``lattice_job.py``); return its stats."""
    import kaldi_decoder

    if cfg.lattices:
        from asrtrain.decode.lattice_job import run_lattice_job

        return run_lattice_job(job, utts, cfg, progress)

    from asrtrain.decode.ctm import ctm_lines
    from asrtrain.decode.kaldi_graph import expand

    handler = job_log(cfg.out, job)
    try:
        graph, tmap, scorer = open_inputs(cfg)
        labels = graph.label_info(tmap)
        stats = JobStats()
        decoders = load_decoders(cfg, job, stats)
        grid = settings(cfg.lmwts, cfg.wips)
        hyps: dict[str, list[str]] = {name: [] for _, _, name in grid}
        ctms: dict[str, list[str]] = {name: [] for _, _, name in grid}
        for utt in utts:
            scores = score_utterance(utt, scorer, cfg, stats)
            for w in cfg.lmwts:
                t0, c0 = time.perf_counter(), time.process_time()
                # a Kaldi graph: one gather of the scaled pdf matrix to transition-id columns
                # per LM weight; DecodableCtc copies it and serves every penalty's pass
                mat = scores / w if tmap is None else expand(scores / w, tmap)
                decodable = kaldi_decoder.DecodableCtc(np.ascontiguousarray(mat))
                del mat
                stats.decode_seconds += time.perf_counter() - t0
                stats.decode_cpu_seconds += time.process_time() - c0
                for p in cfg.wips:
                    name = setting_name(w, p, cfg.wips)
                    path = _decode_pass(decoders[p][0], decodable, utt, name, stats)
                    if path is None:
                        hyps[name].append(utt)
                        continue
                    hyps[name].append(" ".join([utt] + [graph.words.get(x, f"#{x}")
                                                        for x in path.words]))
                    ctms[name].extend(ctm_lines(utt, path, graph.words, labels, graph.silence,
                                                graph.prons))
                del decodable
            if progress is not None:
                progress(1)
        part = job_dir(cfg, job)
        for _, _, name in grid:
            write_text(part / f"hyp.{name}.txt", "".join(h + "\n" for h in hyps[name]))
            write_text(part / f"ctm.{name}.ctm", "".join(c + "\n" for c in ctms[name]))
        write_text(part / "stats.json", json.dumps(asdict(stats)) + "\n")
        log.info("job %d: %d utterances, %d frames, scoring %.2fs, penalised graphs %.2fs, "
                 "decoding %.2fs (%d passes)", job, stats.utterances, stats.frames,
                 stats.score_seconds, stats.penalty_seconds, stats.decode_seconds, len(grid))
        return stats
    finally:
        logging.getLogger("asrtrain").removeHandler(handler)
        handler.close()


def _decode_pass(decoder: Any, decodable: Any, utt: str, name: str, stats: JobStats) -> Any:
    """One search; the best path, or None (logged, counted) when no path survived."""
    from asrtrain.decode.ctm import read_best_path

    t0, c0 = time.perf_counter(), time.process_time()
    decoder.decode(decodable)
    final = decoder.reached_final()
    ok, lattice = decoder.get_best_path(use_final_probs=final)
    stats.decode_seconds += time.perf_counter() - t0
    stats.decode_cpu_seconds += time.process_time() - c0
    if not final:
        stats.not_final += 1
        log.warning("utterance %s (%s): no final state reached; partial best path", utt, name)
    if not ok:
        stats.failed.append(utt)
        log.warning("utterance %s (%s): no surviving path; empty hypothesis", utt, name)
        return None
    return read_best_path(lattice)


def _worker(job: int, utts: list[str], cfg: DecodeConfig, report: Any) -> JobStats:
    """A spawned job: one thread, progress through ``report``."""
    if cfg.model is not None:  # one core per job (torch would take them all)
        import torch

        torch.set_num_threads(1)
    return run_job(job, utts, cfg, progress=report)


# Frames a job must hold to be worth a process of its own: a spawned job imports torch and
# loads the graph (and model) again, about 3 s on one core, as long as 100 s of audio takes
# to decode at 0.03 x real time. Smaller jobs run one after another in this process, with
# the same parts, logs and results as spawned ones.
SPAWN_MIN_FRAMES = 10_000


def run_jobs(cfg: DecodeConfig, jobs: list[list[str]], total: int, frames: int) -> list[JobStats]:
    """All jobs: spawned when each holds ``SPAWN_MIN_FRAMES``, else in this process."""
    from asrtrain.core.errors import AsrtrainError
    from asrtrain.core.progress import Progress
    from asrtrain.core.workers import run_workers

    with Progress("decode", total=total, unit=" utts") as bar:
        if len(jobs) == 1 or frames < SPAWN_MIN_FRAMES * len(jobs):
            if len(jobs) > 1:
                log.info("%d jobs of under %d frames each run in this process, one after "
                         "another (a process of its own would take longer to start)",
                         len(jobs), SPAWN_MIN_FRAMES)
            return [run_job(j, utts, cfg, progress=bar.advance) for j, utts in enumerate(jobs)]
        try:
            return run_workers(_worker, [(j, utts, cfg) for j, utts in enumerate(jobs)], len(jobs),
                               on_message=lambda _job, n: bar.advance(n))
        except AsrtrainError as exc:
            raise InputError(f"decode {exc} (see {cfg.out}/log/decode.<job>.log)") from None


def decode(cfg: DecodeConfig) -> dict[str, Any]:
    """Decode every utterance of DATA (or of the oracle alignments); returns the figures."""
    from asrtrain.core.atomic import atomic_path

    if cfg.nj < 1:
        raise ConfigError(f"--nj must be at least 1, got {cfg.nj}")
    graph, tmap, scorer = open_inputs(cfg)
    check_identity(cfg, graph, scorer, tmap)
    utts = scorer.utterances()
    if not utts:
        raise InputError("no utterances to decode", cfg.oracle or cfg.data)
    adapted = adapt_first(cfg, scorer)
    del scorer
    pdf_map = graph_pdf_map_id(graph)
    if pdf_map is not None:
        write_text(cfg.out / "pdf_map_id", pdf_map + "\n")
    nj = min(cfg.nj, len(utts))
    cfg.nj = nj
    log.info("decoding %d utterances (%d frames) in %d jobs, LM weights %s, insertion penalties "
             "%s; graph %s", len(utts), sum(n for _, n in utts), nj,
             [lmwt_name(w) for w in cfg.lmwts], [wip_name(p) for p in cfg.wips],
             ", ".join(f"{k} {v[0]} states {v[1]} arcs" for k, v in graph.sizes.items()
                       if k in ("G", "HCLG")))
    stats = run_jobs(cfg, split_by_frames(utts, nj), len(utts), sum(n for _, n in utts))
    if cfg.lattices:
        return _finish_lattices(cfg, graph, tmap, stats, {u for u, _ in utts}, adapted)
    for _, _, name in settings(cfg.lmwts, cfg.wips):
        for kind, ext in (("hyp", "txt"), ("ctm", "ctm")):
            parts = [job_dir(cfg, j) / f"{kind}.{name}.{ext}" for j in range(nj)]
            with atomic_path(cfg.out / kind / f"{name}.{ext}") as tmp:
                with open(tmp, "w", encoding="utf-8") as fh:
                    for p in parts:
                        fh.write(read_text(p))
    _remove_stale(cfg)
    remove_stale_lattices(cfg.out, 0)  # lattices of an earlier decode would not match the hyps
    figures = {**summarize(cfg, stats), **adapted}
    if cfg.text is not None:
        figures["ref_oov_tokens"] = copy_reference(cfg.text, cfg.out / "ref.txt", graph.words,
                                                  {u for u, _ in utts})
    write_text(cfg.out / "decode_stats.json", json.dumps(figures, indent=2) + "\n")
    return figures


def _finish_lattices(cfg: DecodeConfig, graph: GraphInfo, tmap: Any, stats: list[JobStats],
                     utts: set[str], adapted: dict[str, Any]) -> dict[str, Any]:
    """The grid swept on the jobs' lattices; figures as ``decode`` writes them."""
    from asrtrain.decode.lattice_job import lattice_figures, sweep

    remove_stale_lattices(cfg.out, cfg.nj)
    swept = sweep(cfg, graph, tmap, cfg.nj)
    figures = {**summarize(cfg, stats, passes=1), **adapted}
    figures.update(lattice_figures(stats, swept, figures["audio_seconds"]))
    if cfg.text is not None:
        figures["ref_oov_tokens"] = copy_reference(cfg.text, cfg.out / "ref.txt", graph.words,
                                                  utts)
    write_text(cfg.out / "decode_stats.json", json.dumps(figures, indent=2) + "\n")
    return figures


def _remove_stale(cfg: DecodeConfig) -> None:
    """Drop hyps/CTMs of settings this run did not decode (a scoring sweep reads them all)."""
    from asrtrain.decode.lattice_sweep import remove_other_settings

    remove_other_settings(cfg.out, {name for _, _, name in settings(cfg.lmwts, cfg.wips)})
    if cfg.text is None and (cfg.out / "ref.txt").exists():
        log.warning("%s is from an earlier decode (no --text given now)", cfg.out / "ref.txt")


def summarize(cfg: DecodeConfig, stats: list[JobStats], passes: int | None = None
              ) -> dict[str, Any]:
    """Totals over jobs and the real-time factors (one core per job); a pass is one
    (LM weight, penalty) search, so ``*_per_lmwt`` is per pass when penalties are swept
    (a lattice decode makes one pass for the whole grid)."""
    frames = sum(s.frames for s in stats)
    audio = frames * 0.01
    passes = len(cfg.lmwts) * len(cfg.wips) if passes is None else passes
    dec = sum(s.decode_seconds for s in stats)
    cpu = sum(s.decode_cpu_seconds for s in stats)
    score = sum(s.score_seconds for s in stats)
    failed = sorted({u for s in stats for u in s.failed})
    figures = {"utterances": sum(s.utterances for s in stats), "frames": frames,
               "audio_seconds": audio, "lmwts": [lmwt_name(w) for w in cfg.lmwts],
               "wips": [wip_name(p) for p in cfg.wips],
               "settings": [name for _, _, name in settings(cfg.lmwts, cfg.wips)],
               "rtf_decode_per_lmwt": cpu / passes / audio if audio else None,
               "rtf_decode_wall_per_lmwt": dec / passes / audio if audio else None,
               "rtf_scoring": score / audio if audio else None,
               "penalty_graph_seconds": sum(s.penalty_seconds for s in stats),
               "not_final": sum(s.not_final for s in stats), "failed": failed}
    log.info("real-time factor on one core: decoding %.4f per pass from CPU time (%.4f wall, "
             "%d passes), scoring %.4f wall", figures["rtf_decode_per_lmwt"] or 0.0,
             figures["rtf_decode_wall_per_lmwt"] or 0.0, passes, figures["rtf_scoring"] or 0.0)
    if figures["not_final"]:
        log.warning("%d decodes ended without reaching a final state", figures["not_final"])
    if failed:
        log.warning("%d utterances got an empty hypothesis (no surviving path): %s", len(failed),
                    ", ".join(failed[:5]))
    return figures

