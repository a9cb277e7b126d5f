"""Synthetic speaker-shifted corpora for the adaptation tests.

Frames come from "phone" classes shared by all speakers; each speaker warps
them by its own affine map (a diagonal scale and an offset), so the
speaker is in the features the way a vocal tract and a channel put it there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def make_corpus(root: Path, speakers: int = 6, utts: int = 8, dim: int = 12, classes: int = 10,
                frames: tuple[int, int] = (150, 250), shift: float = 1.0, seed: int = 0,
                rotate: float = 0.0, warp: bool = True) -> Path:
    """A Kaldi data dir (feats.scp, utt2spk, spk2utt, ali.scp) of speaker-warped frames."""
    import kaldiio

    rng = np.random.default_rng(seed)
    means = rng.normal(0.0, 3.0, (classes, dim))
    stds = rng.uniform(0.5, 1.2, (classes, dim))
    root.mkdir(parents=True, exist_ok=True)
    feats, alis, utt2spk = {}, {}, {}
    for s in range(speakers):
        spk = f"spk{s:02d}"
        scale = rng.uniform(0.8, 1.25, dim) if warp else np.ones(dim)
        mix = np.eye(dim) + rotate * rng.normal(0.0, 1.0, (dim, dim)) / np.sqrt(dim)
        offset = rng.normal(0.0, shift, dim)
        for u in range(utts):
            n = int(rng.integers(*frames))
            labels = np.repeat(rng.integers(0, classes, n // 5 + 1), 5)[:n]
            z = means[labels] + stds[labels] * rng.normal(size=(n, dim))
            utt = f"{spk}-{u:03d}"
            feats[utt] = ((z * scale) @ mix.T + offset).astype(np.float32)
            alis[utt] = labels.astype(np.int32)
            utt2spk[utt] = spk
    with kaldiio.WriteHelper(f"ark,scp:{root / 'feats.ark'},{root / 'feats.scp'}") as w:
        for k in sorted(feats):
            w(k, feats[k])
    with kaldiio.WriteHelper(f"ark,scp:{root / 'ali.ark'},{root / 'ali.scp'}") as w:
        for k in sorted(alis):
            w(k, alis[k])
    (root / "utt2spk").write_text("".join(f"{k} {utt2spk[k]}\n" for k in sorted(utt2spk)))
    spk2utt: dict[str, list[str]] = {}
    for k in sorted(utt2spk):
        spk2utt.setdefault(utt2spk[k], []).append(k)
    (root / "spk2utt").write_text("".join(f"{s} {' '.join(u)}\n" for s, u in spk2utt.items()))
    return root
