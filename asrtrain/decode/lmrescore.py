"""``asrtrain rescore``: a decode directory's lattices rescored with the full LM, then swept.

Kaldi splits it the same way: ``steps/decode.sh`` writes ``lat.N.gz`` and scores them
(``local/score.sh``), ``steps/lmrescore_const_arpa.sh OLD_LANG NEW_LANG DATA IN OUT``
reads IN's lattices, writes OUT's (each job's archive rescored by
``lattice-lmrescore --lm-scale=-1`` with the old G, then ``lattice-lmrescore-const-arpa``
with the full LM) and scores OUT like a decode. So the output directory is a decode
directory as ``decode --lattices`` writes one: ``lat/lat.<job>.gz`` (Kaldi's archives),
``hyp/<name>.txt``, ``ctm/<name>.ctm``, ``ref.txt``, and ``asrtrain score --sweep OUT
[--pick-on DEV_OUT]`` reads it unchanged; a rescore of a rescore works too.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import atomic_path, write_text
from asrtrain.core.errors import InputError
from asrtrain.decode.grid import (
    DEFAULT_LMWT,
    DEFAULT_WIP,
    lmwt_name,
    parse_lmwt,
    parse_wip,
    wip_name,
)
from asrtrain.decode.rescore import LanguageModel, RescoreStats, rescore

log = logging.getLogger("asrtrain.decode")


@dataclass
class RescoreConfig:
    """Everything ``asrtrain rescore`` needs."""

    old_lm: Path
    new_lm: Path
    graph: Path
    latdir: Path
    out: Path
    lmwts: list[float] = field(default_factory=lambda: parse_lmwt(DEFAULT_LMWT, 0.1))
    wips: list[float] = field(default_factory=lambda: parse_wip(DEFAULT_WIP))
    text: Path | None = None
    tid2pdf: Path | None = None


def lattice_archives(latdir: Path) -> list[Path]:
    """``LATDIR/lat/lat.0.gz`` … of a ``decode --lattices`` run, in job order."""
    from asrtrain.decode.lattice_job import lattice_archive

    paths: list[Path] = []
    while lattice_archive(latdir, len(paths)).exists():
        paths.append(lattice_archive(latdir, len(paths)))
    if not paths:
        raise InputError(f"no lattices ({lattice_archive(Path('.'), 0)}): decode with --lattices "
                         "first", latdir)
    every = list(lattice_archive(latdir, 0).parent.glob("lat.*.gz"))
    if len(every) != len(paths):
        raise InputError(f"{len(every)} lattice archives but only jobs 0..{len(paths) - 1} in "
                         "sequence: a job's archive is missing", latdir)
    return paths


def load_lm(path: Path, words_txt: Path, which: str) -> LanguageModel:
    """The LM at ``path``: a lang dir (``which`` "first": its first-pass LM, ``lm_first/``,
    or ``lm_full/`` when it was not pruned; "full": ``lm_full/``), an LM store directory,
    or an ARPA file (plain or gzipped, read into a store in memory over ``words_txt``)."""
    from asrtrain.lang.lang_lm import FULL_DIR, load_lms
    from asrtrain.lang.lexicon import read_symbols
    from asrtrain.lang.lmstore import LmStore
    from asrtrain.lang.trie import read_trie

    path = Path(path)
    if (path / FULL_DIR).is_dir():
        if (path / "words.txt").read_bytes() != Path(words_txt).read_bytes():
            raise InputError(f"words.txt differs from the graph's {words_txt}: not the same "
                             "lexicon", path)
        first, full = load_lms(path)
        return first if which == "first" else full
    if path.is_dir():
        return LmStore.load(path)
    if not path.is_file():
        raise InputError("LM not found (a lang dir, an LM store directory or an ARPA file)", path)
    vocab = read_symbols(words_txt)
    for sym in ("<s>", "</s>"):
        if sym not in vocab:
            raise InputError(f"{sym} is not in the word list", words_txt)
    trie, stats = read_trie(path, vocab)
    if any(stats.skipped):
        log.warning("%s: n-grams skipped per order %s (%d words not in %s)", path, stats.skipped,
                    len(stats.oov_words), words_txt)
    unk = next((vocab[u] for u in ("<UNK>", "<unk>") if u in vocab), None)
    return LmStore.from_trie(trie, vocab["<s>"], vocab["</s>"], unk)


def rescore_archive(src: Path, dest: Path, old: LanguageModel, new: LanguageModel,
                    stats: RescoreStats) -> None:
    """One job's archive rescored into ``dest`` (atomically: complete or absent)."""
    from asrtrain.decode.lattice_io import read_archive, write_archive

    def rescored():
        for utt, lat in read_archive(src):
            got, st = rescore(lat, old, new)
            stats.add(st)
            if st.empty:
                log.warning("%s: utterance %s has no complete path after rescoring", src, utt)
            yield utt, got

    write_archive(dest, rescored())


def run_rescore(cfg: RescoreConfig) -> dict[str, Any]:
    """Rescore every archive of ``cfg.latdir`` into ``cfg.out``, sweep the grid; figures."""
    from asrtrain.decode.graph_dir import GraphInfo, load_tid2pdf
    from asrtrain.decode.lattice_io import read_archive
    from asrtrain.decode.lattice_job import lattice_archive
    from asrtrain.decode.lattice_sweep import write_sweep

    archives = lattice_archives(cfg.latdir)
    graph = GraphInfo.load(cfg.graph)
    labels = graph.label_info(load_tid2pdf(cfg.tid2pdf, graph))
    t0 = time.perf_counter()
    words = cfg.graph / "words.txt"
    old, new = load_lm(cfg.old_lm, words, "first"), load_lm(cfg.new_lm, words, "full")
    load_s = time.perf_counter() - t0
    log.info("rescoring %d lattice archives of %s: first-pass LM %s, new LM %s (loaded in %.1fs)",
             len(archives), cfg.latdir, cfg.old_lm, cfg.new_lm, load_s)
    stats = RescoreStats()
    t0, c0 = time.perf_counter(), time.process_time()
    outputs = [lattice_archive(cfg.out, j) for j in range(len(archives))]
    for src, dest in zip(archives, outputs, strict=True):
        rescore_archive(src, dest, old, new, stats)
    rescore_s, rescore_cpu = time.perf_counter() - t0, time.process_time() - c0

    rescored: set[str] = set()  # the reference's check: which utterances have lattices

    def lattices():
        for path in outputs:
            for utt, lat in read_archive(path):
                rescored.add(utt)
                yield utt, lat

    sweep = write_sweep(lattices(), graph, labels, cfg.lmwts, cfg.wips, cfg.out)
    figures: dict[str, Any] = {
        "latdir": str(cfg.latdir), "old_lm": str(cfg.old_lm), "new_lm": str(cfg.new_lm),
        "lmwts": [lmwt_name(w) for w in cfg.lmwts], "wips": [wip_name(p) for p in cfg.wips],
        "lm_load_seconds": load_s, "rescore_seconds": rescore_s, "rescore_cpu_seconds": rescore_cpu,
        "sweep_seconds": sweep.dp_seconds + sweep.ctm_seconds, **asdict(stats),
        "no_path": sweep.no_path}
    if stats.dropped_arcs or stats.dropped_finals:
        log.warning("%d lattice arcs and %d final states had no probability under the new LM "
                    "and were dropped", stats.dropped_arcs, stats.dropped_finals)
    _reference(cfg, graph, figures, rescored)
    write_text(cfg.out / "rescore_stats.json", json.dumps(figures, indent=2) + "\n")
    return figures


def _reference(cfg: RescoreConfig, graph: Any, figures: dict[str, Any], rescored: set[str]) -> None:
    """``--text`` copied (OOVs counted) as ``decode`` does, else LATDIR's ``ref.txt``."""
    from asrtrain.decode.reference import copy_reference

    if cfg.text is not None:
        figures["ref_oov_tokens"] = copy_reference(cfg.text, cfg.out / "ref.txt", graph.words,
                                                  rescored)
    elif (cfg.latdir / "ref.txt").exists():
        from asrtrain.decode.reference import copy_speakers

        with atomic_path(cfg.out / "ref.txt") as tmp:
            shutil.copyfile(cfg.latdir / "ref.txt", tmp)
        copy_speakers(cfg.latdir / "utt2spk", cfg.out)
