"""The Python API: ``Transcriber("model/").transcribe("a.wav")``.

One object holds the verified model: the network (on the GPU when there is one), the
graph loaded once for the lattice search, the front end's settings (and, for a network
reading SAT fMLLR features, the GMM first pass's models and graph, ``first_pass.py``).
Each call makes a work data dir of its inputs (``inputs.py``), the network's input archive
(``frontend.py``), searches each utterance for a lattice at the exported search
settings, takes the best path at the LM weight and penalty picked on dev (as ``decode
--lattices`` and the sweep do) and word confidences from the lattice's posteriors.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from asrtrain.core.errors import AsrtrainError, InputError
from asrtrain.transcribe.audio import DEFAULT_CHANNEL
from asrtrain.transcribe.bundle import ModelBundle
from asrtrain.transcribe.inputs import Failure, Plan, plan_inputs
from asrtrain.transcribe.results import Report, Transcript, Word
from asrtrain.transcribe.segment import MAX_SECONDS

log = logging.getLogger("asrtrain.transcribe")
FRAME_SHIFT = 0.01


class Transcriber:
    """An exported model, loaded once, applied to any number of recordings."""

    def __init__(self, model_dir: str | os.PathLike[str], device: str | None = None) -> None:
        from asrtrain.decode.graph_dir import GraphInfo
        from asrtrain.decode.latgen import LatticeDecoder, SearchOptions
        from asrtrain.transcribe.network import Network

        self.bundle = ModelBundle.open(model_dir)
        self.settings = self.bundle.settings
        self.graph = GraphInfo.load(self.bundle.graph)
        assert self.graph.num_pdfs is not None
        self.networks = [Network(p, self.graph.num_pdfs, device) for p in self.bundle.networks]
        self.network = self.networks[0]
        d = self.settings.decode
        with tempfile.TemporaryDirectory() as tmp:
            self.decoder = LatticeDecoder(self.bundle.graph / "HCLG.fst",
                                          SearchOptions(beam=d.beam, max_active=d.max_active,
                                                        lattice_beam=d.lattice_beam), Path(tmp))
        self.columns = self.decoder.columns(self.graph.num_pdfs)
        self.labels = self.graph.label_info(None)
        self.first_pass = None
        sat = [s for s in self.settings.streams if s.kind == "sat"]
        if sat:
            from asrtrain.transcribe.first_pass import SatFirstPass

            self.first_pass = SatFirstPass(self.bundle.stream_model("sat"), sat[0])

    def transcribe(self, audio: str | os.PathLike[str], **options: Any) -> Transcript:
        """The transcript of one recording (``options`` as :meth:`run`); an input that
        cannot be transcribed raises its one-line InputError."""
        report = self.run([audio], **options)
        if report.failures:
            raise InputError(report.failures[0].reason)
        return report.transcripts[0]

    def run(self, inputs: list[str | os.PathLike[str]], utt2spk: dict[str, str] | None = None,
            channel: int = DEFAULT_CHANNEL, max_seconds: float = MAX_SECONDS,
            progress: Any = None, work_dir: str | os.PathLike[str] | None = None,
            segment_speakers: bool = False) -> Report:
        """Transcribe audio files, list files or one Kaldi data dir; inputs that fail are
        reported with their reason and the rest go on. ``progress(done, total)`` is called
        as utterances are done."""
        t0, c0 = time.perf_counter(), time.process_time()
        with tempfile.TemporaryDirectory(dir=work_dir, prefix="asrtrain-transcribe-") as tmp:
            plan = plan_inputs(inputs, Path(tmp), self.settings.sample_rate, utt2spk, channel,
                               max_seconds, segment_speakers)
            for note in plan.notes:
                log.warning("%s", note)
            figures: dict[str, Any] = {}
            transcripts, frames = self._decode_plan(plan, Path(tmp), progress, figures)
        report = Report(transcripts=transcripts, failures=plan.failures,
                        audio_seconds=sum(plan.durations.values()) or frames * FRAME_SHIFT,
                        wall_seconds=time.perf_counter() - t0,
                        cpu_seconds=time.process_time() - c0, device=str(self.network.device),
                        first_pass=figures.get("first_pass"))
        if report.first_pass is not None:
            _log_first_pass(report)
        return report

    def _decode_plan(self, plan: Plan, work: Path, progress: Any, figures: dict[str, Any]
                     ) -> tuple[list[Transcript], int]:
        """Front end, network and search over the plan's utterances."""
        from asrtrain.data.shards import open_archive
        from asrtrain.transcribe.frontend import build_input

        if not plan.pieces:
            return [], 0
        try:
            archive_path, skipped = build_input(self.bundle, plan.data_dir, work / "front",
                                                self.first_pass, figures)
        except AsrtrainError as exc:  # nothing usable in any input
            plan.failures.extend(Failure(s, f"{s}: {exc}") for s in sorted(set(plan.sources.values())))
            return [], 0
        archive = open_archive(archive_path)
        score = _scorer([n.scorer(archive) for n in self.networks])
        utts = [u for u, _, _, _ in archive.utterances]
        by_recording: dict[str, Transcript] = {}
        for rid, source in plan.sources.items():
            by_recording[rid] = Transcript(id=rid, source=source,
                                           duration=plan.durations.get(rid, 0.0))
        frames = 0
        for i, utt in enumerate(utts):
            scores = score(utt)
            frames += scores.shape[0]
            piece = plan.pieces[utt]
            t = by_recording[piece.recording]
            t.words.extend(self._words(utt, scores, piece.offset))
            t.segments += 1
            if not t.duration:
                t.duration = scores.shape[0] * FRAME_SHIFT
            if progress is not None:
                progress(i + 1, len(utts))
        for utt, reason in skipped.items():
            if utt in plan.pieces:
                log.warning("%s: segment %s skipped: %s", plan.pieces[utt].source, utt, reason)
        done = [t for t in by_recording.values() if t.segments]
        for t in by_recording.values():
            if not t.segments:
                why = next((r for u, r in skipped.items() if plan.pieces.get(u) and
                            plan.pieces[u].recording == t.id), "no features")
                plan.failures.append(Failure(t.source, f"{t.source}: {why}"))
        return done, frames

    def _words(self, utt: str, scores: Any, offset: float) -> list[Word]:
        """The best path's words of one utterance, with times and confidences."""
        from asrtrain.decode.ctm import word_times
        from asrtrain.decode.latgen import SearchFailed
        from asrtrain.decode.lattice import WordLattice
        from asrtrain.transcribe.confidence import best_arcs, word_confidences

        d = self.settings.decode
        try:
            lat, _info = self.decoder.decode(scores, d.acwt, self.columns, utt)
        except SearchFailed as exc:
            log.warning("utterance %s: %s; no words", utt, exc.reason)
            lat = WordLattice.from_arcs(0, 0, [], {})
        best = best_arcs(lat, d.lmwt, d.wip)
        if best is None:
            return []
        arcs, path = best
        times = word_times(path, self.graph.words, self.labels, self.graph.silence,
                           self.graph.prons)
        confs = word_confidences(lat, arcs, d.lmwt, d.wip)
        return [Word(w, round(offset + s * FRAME_SHIFT, 2), round(offset + (s + n) * FRAME_SHIFT, 2),
                     round(c, 4)) for (w, s, n), c in zip(times, confs, strict=True)]


def _scorer(scorers: list[Any]) -> Any:
    """One network's scorer, or an ensemble's: the mean of its networks' scores."""
    from asrtrain.decode.ensemble import mean_scores

    if len(scorers) == 1:
        return scorers[0]
    return lambda utt: mean_scores([s(utt) for s in scorers])


def _log_first_pass(report: Report) -> None:
    """The SAT first pass in one line (a warning where speakers kept no transform)."""
    fp = report.first_pass or {}
    kinds = fp.get("transforms", {})
    line = (f"SAT first pass: {sum(kinds.values())} speakers, transforms "
            f"{', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}; "
            f"{fp.get('no_path', 0)} utterances without a path; "
            f"{fp.get('cpu_seconds', 0.0):.2f} s CPU")
    if kinds.get("none") or fp.get("no_path"):
        log.warning("%s (a speaker without a transform is given speaker-independent features)",
                    line)
    else:
        log.info("%s", line)
