"""``prepare align --no-held-out-sat-feats``: the recipes that adapt dev and test from the SAT
first pass never read the aligner's transcript-free SAT features of those splits, which
cost about 760 CPU-seconds a held-out hour (36% of the 4 h benchmark's alignment): without
them train's features, and every split's alignments, are what the default gives."""

from __future__ import annotations

import sys
from pathlib import Path

import kaldiio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ladder_runs import run  # noqa: E402

from asrtrain.lang.pdf_ali import read_alignments  # noqa: E402


def _feats(ali: Path, split: str) -> dict[str, np.ndarray]:
    return dict(kaldiio.load_scp_sequential(str(ali / "fmllr" / split / "feats.scp")))


def test_train_only_gives_the_same_train_features_and_alignments(one_process: Path, tiny_corpus: Path,
                                                                tiny_mfcc: Path, tmp_path: Path) -> None:
    out = tmp_path / "ali"
    report = run(tiny_corpus, tiny_mfcc, out, 1, "--no-held-out-sat-feats")
    assert set(report["sat_fmllr"]) == {"train"}
    assert not (out / "fmllr" / "dev").exists() and not (out / "fmllr" / "test").exists()
    assert set(_feats(one_process, "dev")) and set(_feats(one_process, "test"))  # the default writes them
    mine, default = _feats(out, "train"), _feats(one_process, "train")
    assert mine.keys() == default.keys()
    assert all(np.array_equal(mine[u], default[u]) for u in mine)
    for split in ("train", "dev", "test"):
        a, b = dict(read_alignments(out / split / "state.scp")), dict(read_alignments(one_process / split / "state.scp"))
        assert a.keys() == b.keys() and all(np.array_equal(a[u], b[u]) for u in a), split
