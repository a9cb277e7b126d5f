"""The SAT stream of an exported model: Kaldi's ``decode_fmllr.sh`` before the network.

A network trained on the SAT model's features (``--fmllr-source sat``) saw, for its dev
and test speakers, the features of ``prepare fmllr-feats --transforms`` with the
transforms of ``decode --first-pass``. New recordings go the same way, per speaker: the
LDA+MLLT GMM searches each utterance on the exported GMM graph for a lattice (the first
pass's search settings), the best path at the recorded LM weight labels every frame with
a pdf, the speaker's fMLLR transform is estimated against the SAT GMM from those labels
(``decode/first_pass.py``: silence down-weighted, a diagonal, bias-only or no transform
when the frames are too few, utterances without a path counted), and the SAT front end
gives the features. Everything is computed in memory; nothing of the recipe's decode dirs
is needed.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from asrtrain.transcribe.settings import StreamSpec

log = logging.getLogger("asrtrain.transcribe")


class SatFirstPass:
    """The exported ``sat/`` directory loaded once: both GMMs, the graph, the search."""

    def __init__(self, root: Path, spec: StreamSpec) -> None:
        from asrtrain.decode.latgen import LatticeDecoder, SearchOptions
        from asrtrain.transcribe.sources import check_first_pass_models

        self.root = Path(root)
        self.lda_path, self.sat_path = self.root / "lda.pt", self.root / "sat.pt"
        self.lda, self.sat, self.graph = check_first_pass_models(self.lda_path, self.sat_path,
                                                                 self.root / "graph")
        opts = spec.options
        self.acwt, self.lmwt = float(opts["acwt"]), float(opts["lmwt"])
        with tempfile.TemporaryDirectory() as tmp:
            self.decoder = LatticeDecoder(self.root / "graph" / "HCLG.fst",
                                          SearchOptions(beam=float(opts["beam"]),
                                                        max_active=int(opts["max_active"]),
                                                        lattice_beam=float(opts["lattice_beam"])),
                                          Path(tmp))
        assert self.graph.num_pdfs is not None
        self.columns = self.decoder.columns(self.graph.num_pdfs)

    def features(self, mfcc: Path, out: Path) -> tuple[Path, dict[str, Any]]:
        """``out/feats.scp``: the SAT features of the MFCC dir ``mfcc`` (``utt2spk``'s
        speakers adapted from their own first pass); and the pass's figures."""
        from asrtrain.adapt.sat_input import adapted_features
        from asrtrain.decode.first_pass import (
            log_report,
            path_pdfs,
            read_transforms,
            transforms_from_paths,
            write_transforms,
        )
        from asrtrain.decode.gmm_scorer import GmmScorer
        from asrtrain.decode.latgen import SearchFailed
        from asrtrain.decode.loglikes import check_scores

        t0, c0 = time.perf_counter(), time.process_time()
        lda = GmmScorer(self.lda_path, mfcc, self.graph.num_pdfs, rung=self.lda)
        paths = {}
        for utt, _ in lda.utterances():
            scores = check_scores(utt, lda(utt), lda.num_pdfs, self.lda_path)
            try:
                lat, _info = self.decoder.decode(scores, self.acwt, self.columns, utt)
            except SearchFailed as exc:
                log.warning("utterance %s: first pass: %s; its frames add nothing to its "
                            "speaker's transform", utt, exc.reason)
                continue
            pdfs = path_pdfs(lat, self.lmwt)
            if pdfs is not None:
                paths[utt] = pdfs
        sat = GmmScorer(self.sat_path, mfcc, None, rung=self.sat)
        transforms, report = transforms_from_paths(sat, paths)
        log_report(report, out)
        # through OUT/trans.scp as decode --first-pass writes them and fmllr-feats reads them
        # (stored as float32): the features of the recipe's path, to the bit
        trans = read_transforms(write_transforms(out, transforms))
        adapted_features(sat, trans, out, "the first pass")
        figures = {**report.figures(), "seconds": time.perf_counter() - t0,
                   "cpu_seconds": time.process_time() - c0}
        return out / "feats.scp", figures

