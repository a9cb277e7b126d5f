"""A small learnable training archive, written with the real archive writer.

Each utterance is a sequence of segments (3–9 frames) of pdf ids; pdf 0 plays
silence (40% of segments). A frame's features are its pdf's embedding plus
noise, on a large offset and scale, so the mapping is learnable by a tiny BLSTM
only if the input normalisation inside the model works.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

NUM_PDFS = 5
DIM = 8


def write_learnable_archive(out: Path, utts: int, seed: int, noise: float = 1.0) -> Path:
    import kaldiio

    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream

    rng = np.random.default_rng(seed)
    embed = np.random.default_rng(1234).normal(size=(NUM_PDFS, DIM))  # shared by train and valid
    work = out.parent / f"{out.stem}_src"
    work.mkdir(parents=True, exist_ok=True)
    feats_scp, ali_scp = work / "feats.scp", work / "ali.scp"
    with kaldiio.WriteHelper(f"ark,scp:{work / 'feats.ark'},{feats_scp}") as fw, \
            kaldiio.WriteHelper(f"ark,scp:{work / 'ali.ark'},{ali_scp}") as aw:
        for u in range(utts):
            labels: list[int] = []
            while len(labels) < rng.integers(30, 70):
                pdf = 0 if rng.random() < 0.4 else int(rng.integers(1, NUM_PDFS))
                labels += [pdf] * int(rng.integers(3, 10))
            y = np.array(labels, dtype=np.int32)
            x = embed[y] + noise * rng.normal(size=(len(y), DIM))
            x = (50.0 + 20.0 * x).astype(np.float32)
            key = f"spk{u % 3}-{u:04d}"
            fw(key, x)
            aw(key, y)
    write_archive(out, [Stream("feats", feats_scp)], ali_scp=str(ali_scp), num_pdfs=NUM_PDFS)
    return out


@pytest.fixture(scope="session")
def learnable_archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(train.h5 with 60 utterances, valid.h5 with 20), same pdf embeddings."""
    root = tmp_path_factory.mktemp("archives")
    return (write_learnable_archive(root / "train.h5", 60, seed=0),
            write_learnable_archive(root / "valid.h5", 20, seed=1))
