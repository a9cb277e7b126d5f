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


def test_a_training_copy_gets_sat_features_from_its_transcripts(one_process: Path, tiny_corpus: Path,
                                                              tiny_mfcc: Path, tmp_path: Path) -> None:
    """``--extra`` (speed-perturbed copies the network trains on, the ladder does not): aligned as
    a held-out split, its SAT features written from the transforms its transcripts gave. A copy of
    train itself must come out near train's own SAT features and alignments, and leave every
    other output as the default run wrote it."""
    out = tmp_path / "ali"
    report = run(tiny_corpus, tiny_mfcc, out, 1, "--no-held-out-sat-feats",
                 "--extra", f"copy={tiny_mfcc / 'train'}")
    assert set(report["sat_fmllr"]) == {"train", "copy"}
    assert report["splits"]["copy"]["training_copy"] is True
    assert not (out / "fmllr" / "dev").exists()
    copy, train = _feats(out, "copy"), _feats(one_process, "train")
    assert copy.keys() == train.keys()
    diff = np.concatenate([copy[u] - train[u] for u in copy])
    spread = np.concatenate(list(train.values())).var(axis=0).sum()
    print(f"copy vs train SAT features: squared difference {np.square(diff).sum(1).mean():.3f}, "
          f"train's variance {spread:.3f}")
    # measured: 0.5% of train's variance; the transcript-free estimate of a --split copy 2.3%
    assert np.square(diff).sum(1).mean() < 0.01 * spread
    a, b = dict(read_alignments(out / "copy" / "ali.scp")), dict(read_alignments(one_process / "train" / "ali.scp"))
    same = sum(int((a[u] == b[u]).sum()) for u in b if u in a)
    assert same > 0.9 * sum(len(v) for v in b.values())
    for split in ("train", "dev", "test"):
        a, b = dict(read_alignments(out / split / "state.scp")), dict(read_alignments(one_process / split / "state.scp"))
        assert a.keys() == b.keys() and all(np.array_equal(a[u], b[u]) for u in a), split
