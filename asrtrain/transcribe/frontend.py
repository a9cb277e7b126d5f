"""From a data dir to the network's input archive, as the recipe's stages make it.

Each stream of the model is computed by the library function its training stream came
from: ``prepare features`` (with the recorded options, CMVN per speaker), ``prepare
ivectors`` with the exported extractor, ``prepare fmllr`` with the exported LDA and GMM,
``prepare fmllr-feats`` with the transforms of the GMM first pass (``first_pass.py``);
then ``prepare archive`` fuses them into the same float16 chunks. So new recordings are
treated as the training, dev and test sets were, down to the dither's seed.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from asrtrain.transcribe.bundle import ModelBundle
from asrtrain.transcribe.settings import StreamSpec

log = logging.getLogger("asrtrain.transcribe")
#: Loggers of the stages the front end runs, and the level they are held at: their INFO
#: lines (work dirs, counts, progress) are about a temporary directory, not the user's files;
#: fMLLR's per-speaker notes ("a diagonal transform instead of a full one") would be one line
#: per segment with --speaker-per segment; so would the SAT first pass's (``asrtrain.decode``:
#: the transcriber sums them in one line). Warnings about the user's files still show.
STAGE_LOGGERS = {"asrtrain.features": logging.WARNING, "asrtrain.archive": logging.WARNING,
                 "asrtrain.progress": logging.WARNING, "asrtrain.adapt": logging.ERROR,
                 "asrtrain.decode": logging.WARNING}


@contextlib.contextmanager
def quiet_stages() -> Iterator[None]:
    """The stages' INFO lines off for the duration (their levels restored after)."""
    loggers = [logging.getLogger(name) for name in STAGE_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg, level in zip(loggers, STAGE_LOGGERS.values(), strict=True):
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _features(data: Path, work: Path, options: dict[str, Any], made: dict[str, Path]) -> Path:
    """The features dir of ``data`` with ``options`` (computed once per distinct options)."""
    from asrtrain.data.features import FeatureConfig, make_features

    key = json.dumps(options, sort_keys=True)
    if key not in made:
        out = work / f"feats{len(made)}"
        make_features(data, out, FeatureConfig(**options), nj=1)
        made[key] = out
    return made[key]


def _stream(spec: StreamSpec, bundle: ModelBundle, data: Path, work: Path,
            made: dict[str, Path], first_pass: Any, figures: dict[str, Any]) -> Any:
    """The ``fuse.Stream`` of one spec, its scp computed under ``work``."""
    from asrtrain.data.fuse import Stream, kaldi_ivector_period, read_cmvn_scp

    feats = _features(data, work, spec.features, made)
    if spec.kind == "features":
        scp = feats / "feats.scp"
    elif spec.kind == "sat":
        if first_pass is None:
            from asrtrain.transcribe.first_pass import SatFirstPass

            first_pass = SatFirstPass(bundle.stream_model("sat"), spec)
        scp, figures["first_pass"] = first_pass.features(feats, work / f"sat_{spec.name}")
    elif spec.kind == "ivector":
        from asrtrain.adapt.ivector import prepare_ivectors

        out = work / f"ivector_{spec.name}"
        prepare_ivectors(feats, out, period=spec.period or 10, online=spec.online,
                         extractor_dir=bundle.stream_model("ivector"))
        scp = out / "ivectors.scp"
    else:
        from asrtrain.adapt.fmllr import prepare_fmllr

        out = work / f"fmllr_{spec.name}"
        opts = dict(spec.options)
        prepare_fmllr(feats, out, lda_dim=int(opts.get("lda_dim", 40)),
                      context=int(opts.get("splice", 4)), model_dir=bundle.stream_model("fmllr"),
                      iters=int(opts.get("iters", 5)), passes=int(opts.get("passes", 10)),
                      min_full=int(opts.get("min_frames_full", 400)),
                      min_diag=int(opts.get("min_frames_diag", 100)))
        scp = out / "feats.scp"
    stream = Stream(spec.name, scp, period=kaldi_ivector_period(scp) or spec.period
                    if spec.kind == "ivector" else None)
    if spec.cmvn:
        stream.cmvn = read_cmvn_scp(feats / "cmvn.scp")
        stream.norm_vars = spec.cmvn == "vars"
    return stream


def build_input(bundle: ModelBundle, data: Path, work: Path, first_pass: Any = None,
                figures: dict[str, Any] | None = None) -> tuple[Path, dict[str, str]]:
    """The input archive of the utterances of ``data``; and the skipped ones, with reasons.
    ``first_pass``: the model's SAT first pass, loaded (``SatFirstPass``; else loaded here
    when a stream needs it); its figures go to ``figures["first_pass"]``."""
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.kaldi_dir import read_table, read_utt2spk

    made: dict[str, Path] = {}
    out = work / "input.h5"
    figures = {} if figures is None else figures
    with quiet_stages():
        streams = [_stream(spec, bundle, data, work, made, first_pass, figures)
                   for spec in bundle.settings.streams]
        summary = write_archive(out, streams, utt2spk=read_utt2spk(data / "utt2spk"),
                                chunk=bundle.settings.chunk, tolerance=bundle.settings.tolerance)
    skipped: dict[str, str] = {}
    for feats in made.values():
        if (feats / "skipped_utts").is_file():
            skipped.update(read_table(feats / "skipped_utts"))
    skipped.update(summary["skipped"])
    return out, skipped
