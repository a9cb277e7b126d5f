"""Archives of random frames at a chosen shape, written by the real writer, for benchmarks.

A benchmark of the training loop needs an archive of the model's input and output
sizes (260 features and 32,000 pdfs for the paper's model) without preparing a
corpus; the loader then reads it exactly as it reads a real one. The features
are Gaussian and the targets uniform: nothing to learn, everything to time.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np


def write_random_archive(out: Path, chunks: int, dim: int, num_pdfs: int, seed: int = 0,
                         chunks_per_utt: int = 8, chunk: int = 21) -> Path:
    """Write ``out`` with about ``chunks`` full 21-frame chunks of random data; returns ``out``."""
    import kaldiio

    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream

    rng = np.random.default_rng(seed)
    frames = chunks_per_utt * chunk
    with tempfile.TemporaryDirectory(dir=Path(out).parent) as work:
        feats_scp, ali_scp = f"{work}/feats.scp", f"{work}/ali.scp"
        with kaldiio.WriteHelper(f"ark,scp:{work}/feats.ark,{feats_scp}") as fw, \
                kaldiio.WriteHelper(f"ark,scp:{work}/ali.ark,{ali_scp}") as aw:
            for u in range(-(-chunks // chunks_per_utt)):
                key = f"spk{u % 4}-{u:06d}"
                fw(key, rng.standard_normal((frames, dim), dtype=np.float32))
                aw(key, rng.integers(0, num_pdfs, frames, dtype=np.int32))
        write_archive(out, [Stream("feats", Path(feats_scp))], ali_scp=ali_scp, num_pdfs=num_pdfs, chunk=chunk)
    return Path(out)
