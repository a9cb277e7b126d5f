"""Shared by the tests of ``prepare align``'s jobs: a small ladder on the tiny corpus,
run as a user runs it, and the check that two runs gave the same alignments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch

from asrtrain.lang.pdf_ali import read_alignments

LADDER = ["--mono-gauss", "100", "--mono-iters", "6", "--leaves", "60", "--gauss", "150",
          "--iters", "5", "--mono-utts", "8", "--retry-beam", "400", "--last-beam", "4000", "--max-lost", "1"]


def cli(*args: object, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """``asrtrain ARGS`` as a user runs it."""
    env = dict(os.environ, COLUMNS="3000", OMP_NUM_THREADS="1")
    return subprocess.run([str(Path(sys.executable).parent / "asrtrain"), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


def align_args(tiny_corpus: Path, tiny_mfcc: Path, out: Path, nj: int) -> list[object]:
    """``prepare align`` of the tiny corpus' three splits with the small ladder."""
    return ["prepare", "align", tiny_corpus / "dict", tiny_mfcc / "train", out,
            "--split", f"dev={tiny_mfcc / 'dev'}", "--split", f"test={tiny_mfcc / 'test'}",
            "--phones", tiny_corpus / "phones.txt", *LADDER, "--nj", str(nj)]


def run(tiny_corpus: Path, tiny_mfcc: Path, out: Path, nj: int, *extra: str) -> dict:
    proc = cli(*align_args(tiny_corpus, tiny_mfcc, out, nj), *extra)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def assert_same(one: Path, two: Path) -> None:
    """Alignments, failures, every rung's model and the SAT features equal (up to the
    order of float sums)."""
    for split in ("train", "dev", "test"):
        for table in ("ali.scp", "state.scp"):
            a = dict(read_alignments(one / split / table))
            b = dict(read_alignments(two / split / table))
            assert a.keys() == b.keys() and a, (split, table)
            assert all(np.array_equal(a[u], b[u]) for u in a), (split, table)
        assert (one / split / "failed.txt").read_text() == (two / split / "failed.txt").read_text()
    for stage in ("mono", "tri", "lda", "sat"):
        a = torch.load(one / "models" / f"{stage}.pt", weights_only=False)
        b = torch.load(two / "models" / f"{stage}.pt", weights_only=False)
        for key, value in a["model"].items():
            assert torch.allclose(value, b["model"][key], rtol=1e-6, atol=1e-8), (stage, key)
        assert a["self_loop"] == pytest.approx(b["self_loop"], rel=1e-9)
        if a["front"]["lda"] is not None:
            assert np.allclose(a["front"]["lda"], b["front"]["lda"], rtol=1e-6, atol=1e-8)
        assert a["front"]["fmllr"].keys() == b["front"]["fmllr"].keys()
        for spk, w in a["front"]["fmllr"].items():
            assert np.allclose(w, b["front"]["fmllr"][spk], rtol=1e-6, atol=1e-8), (stage, spk)
    for split in ("train", "dev", "test"):   # the SAT features (dev, test: fMLLR estimated)
        a = dict(kaldiio.load_scp_sequential(str(one / "fmllr" / split / "feats.scp")))
        b = dict(kaldiio.load_scp_sequential(str(two / "fmllr" / split / "feats.scp")))
        assert a.keys() == b.keys() and a, split
        assert all(np.allclose(a[u], b[u], rtol=1e-5, atol=1e-5) for u in a), split
