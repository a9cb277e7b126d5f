"""``prepare align --nj N``: the speakers split into jobs, each in a process of its own,
gives what one process gives (up to the order of float sums)."""

from __future__ import annotations

import json
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch

from asrtrain.align.feats import Utterances
from asrtrain.align.parallel import split_speakers
from asrtrain.lang.pdf_ali import read_alignments

LADDER = ["--mono-gauss", "100", "--mono-iters", "6", "--leaves", "60", "--gauss", "150",
          "--iters", "5", "--mono-utts", "8", "--retry-beam", "400", "--last-beam", "4000", "--max-lost", "1"]


def _run(run_cli, tiny_corpus: Path, tiny_mfcc: Path, out: Path, nj: int) -> dict:
    proc = run_cli("prepare", "align", tiny_corpus / "dict", tiny_mfcc / "train", out,
                   "--split", f"dev={tiny_mfcc / 'dev'}", "--split", f"test={tiny_mfcc / 'test'}",
                   "--phones", tiny_corpus / "phones.txt", *LADDER, "--nj", str(nj),
                   timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def test_jobs_give_what_one_process_gives(tiny_corpus: Path, tiny_mfcc: Path, tmp_path: Path,
                                          run_cli) -> None:
    one = _run(run_cli, tiny_corpus, tiny_mfcc, tmp_path / "nj1", 1)
    two = _run(run_cli, tiny_corpus, tiny_mfcc, tmp_path / "nj2", 2)
    assert one["stages"]["mono"]["jobs"] == 1 and two["stages"]["mono"]["jobs"] == 2
    for split in ("train", "dev", "test"):
        for table in ("ali.scp", "state.scp"):
            a = dict(read_alignments(tmp_path / "nj1" / split / table))
            b = dict(read_alignments(tmp_path / "nj2" / split / table))
            assert a.keys() == b.keys() and a, (split, table)
            assert all(np.array_equal(a[u], b[u]) for u in a), (split, table)
        assert ((tmp_path / "nj1" / split / "failed.txt").read_text()
                == (tmp_path / "nj2" / split / "failed.txt").read_text())
    for stage in ("mono", "tri", "lda", "sat"):
        a = torch.load(tmp_path / "nj1" / "models" / f"{stage}.pt", weights_only=False)
        b = torch.load(tmp_path / "nj2" / "models" / f"{stage}.pt", weights_only=False)
        for key, value in a["model"].items():
            assert torch.allclose(value, b["model"][key], rtol=1e-6, atol=1e-8), (stage, key)
        assert a["self_loop"] == pytest.approx(b["self_loop"], rel=1e-9)
        if a["front"]["lda"] is not None:
            assert np.allclose(a["front"]["lda"], b["front"]["lda"], rtol=1e-6, atol=1e-8)
        assert a["front"]["fmllr"].keys() == b["front"]["fmllr"].keys()
        for spk, w in a["front"]["fmllr"].items():
            assert np.allclose(w, b["front"]["fmllr"][spk], rtol=1e-6, atol=1e-8), (stage, spk)
    for split in ("train", "dev", "test"):   # the SAT features (dev, test: fMLLR estimated)
        a = dict(kaldiio.load_scp_sequential(str(tmp_path / "nj1" / "fmllr" / split / "feats.scp")))
        b = dict(kaldiio.load_scp_sequential(str(tmp_path / "nj2" / "fmllr" / split / "feats.scp")))
        assert a.keys() == b.keys() and a, split
        assert all(np.allclose(a[u], b[u], rtol=1e-5, atol=1e-5) for u in a), split
    for figures in (*two["stages"].values(), *two["splits"].values()):
        assert figures["cpu_seconds"] > 0 and figures["audio_hours"] > 0


def test_speakers_stay_whole_and_jobs_balance_by_frames() -> None:
    frames = {"a": 900, "b": 500, "c": 450, "d": 100}
    utt2spk = {f"{s}{i}": s for s in frames for i in range(2)}
    feats = {u: np.zeros((frames[s] // 2, 1), np.float32) for u, s in utt2spk.items()}
    utts = Utterances(Path("."), feats, {}, utt2spk)
    parts = split_speakers(utts, 2)
    assert [sorted({utt2spk[u] for u in p}) for p in parts] == [["a", "d"], ["b", "c"]]
    assert len(split_speakers(utts, 9)) == 4   # one job per speaker
