"""The network's fMLLR stream from the SAT rung (Kaldi's ``make_fmllr_feats.sh``).

Kaldi feeds its nnets the SAT model's features: LDA+MLLT, then each speaker's fMLLR.
Training speakers have the transforms SAT training estimated under their transcripts
(saved in the rung); a speaker to be recognised gets one from a first decoding pass
(``decode --first-pass`` writes ``trans.scp``). This module applies either.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

log = logging.getLogger("asrtrain.adapt")


def write_fmllr_feats(model: Path, feats_dir: Path, out: Path,
                      transforms: Path | None = None) -> dict[str, Any]:
    """``out/feats.scp`` (+ the data dir's tables) of ``feats_dir`` under the rung."""
    from asrtrain.decode.first_pass import read_transforms
    from asrtrain.decode.gmm_scorer import GmmScorer

    scorer = GmmScorer(model, feats_dir, None)
    given = read_transforms(transforms) if transforms else dict(scorer.rung.train_fmllr)
    return adapted_features(scorer, given, out, transforms or model)


def adapted_features(scorer: Any, given: dict[str, Any], out: Path, where: Any
                     ) -> dict[str, Any]:
    """``out/feats.scp`` of the scorer's features dir through its rung's front end with
    the speakers' transforms ``given`` (``where`` they come from, for the log); a speaker
    without one keeps the speaker-independent features, counted."""
    from asrtrain.adapt.featio import copy_tables, write_matrices
    from asrtrain.adapt.fmllr import COPIED
    from asrtrain.core.errors import InputError

    feats_dir = scorer.tables.data
    if scorer.rung.front.lda is None:
        raise InputError(f"a {scorer.rung.name} model has no LDA+MLLT front end: give the SAT "
                         "(or LDA+MLLT) rung", scorer.model_path)
    speakers = sorted(set(scorer.tables.utt2spk[u] for u, _ in scorer.utterances()))
    missing = [s for s in speakers if s not in given]
    if missing:
        log.warning("%d of %d speakers have no transform in %s (speaker-independent features),"
                    " e.g. %s", len(missing), len(speakers), where, ", ".join(missing[:3]))
    scorer.front.fmllr = {s: w for s, w in given.items() if s in set(speakers)}
    out.mkdir(parents=True, exist_ok=True)
    dim = 0

    def items():
        nonlocal dim
        for utt, _ in scorer.utterances():
            x = scorer.features(utt)
            dim = x.shape[1]
            yield utt, x

    copy_tables(feats_dir, out, COPIED)
    n = write_matrices(out / "feats.scp", items())
    return {"utterances": n, "dim": dim, "speakers": len(speakers),
            "speakers_adapted": len(speakers) - len(missing)}
