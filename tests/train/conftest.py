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


#: The streams of :func:`write_stream_archive`: name → width (logmel: 5 bins with Δ and ΔΔ).
STREAMS = {"fmllr": 4, "ivector": 3, "logmel": 15}


def write_stream_archive(out: Path, utts: int, seed: int, order: tuple[str, ...] = tuple(STREAMS),
                         targets: bool = True) -> Path:
    """An archive of the paper's three streams in ``order`` (tiny widths): logmel carries the pdfs
    (their embedding plus noise, learnable), fmllr and ivector are noise. Every value is far from 0,
    so a zero in a batch is a mask."""
    import kaldiio

    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream

    rng = np.random.default_rng(seed)
    embed = np.random.default_rng(4321).normal(size=(NUM_PDFS, STREAMS["logmel"]))
    work = out.parent / f"{out.stem}_src"
    work.mkdir(parents=True, exist_ok=True)
    tables: dict[str, dict[str, np.ndarray]] = {name: {} for name in (*STREAMS, "ali")}
    for u in range(utts):
        labels: list[int] = []
        while len(labels) < rng.integers(30, 60):
            labels += [int(rng.integers(0, NUM_PDFS))] * int(rng.integers(3, 9))
        y = np.array(labels, dtype=np.int32)
        key = f"spk{u % 3}-{u:04d}"
        tables["logmel"][key] = (50.0 + 10.0 * (embed[y] + 0.5 * rng.normal(size=(len(y), 15)))).astype(np.float32)
        for name in ("fmllr", "ivector"):
            tables[name][key] = (100.0 + rng.uniform(1, 10, size=(len(y), STREAMS[name]))).astype(np.float32)
        tables["ali"][key] = y
    for name, table in tables.items():
        kaldiio.save_ark(str(work / f"{name}.ark"), table, scp=str(work / f"{name}.scp"))
    write_archive(out, [Stream(name, work / f"{name}.scp") for name in order],
                  ali_scp=str(work / "ali.scp") if targets else None, num_pdfs=NUM_PDFS if targets else None)
    return out


@pytest.fixture(scope="session")
def stream_archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(train.h5 with 30 utterances, valid.h5 with 10, test.h5 with 6: no targets, its streams in
    another order: logmel, fmllr, ivector)."""
    root = tmp_path_factory.mktemp("stream_archives")
    return (write_stream_archive(root / "train.h5", 30, seed=0),
            write_stream_archive(root / "valid.h5", 10, seed=1),
            write_stream_archive(root / "test.h5", 6, seed=2, order=("logmel", "fmllr", "ivector"),
                                 targets=False))
