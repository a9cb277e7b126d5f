"""``prepare align --nj N``: the speakers split into jobs, each in a process of its own,
gives what one process gives (up to the order of float sums)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from asrtrain.align.feats import Utterances
from asrtrain.align.parallel import split_speakers

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ladder_runs import assert_same, run  # noqa: E402


@pytest.mark.slow  # 14 s; make test keeps the same equality through a job command
def test_jobs_give_what_one_process_gives(one_process: Path, tiny_corpus: Path,
                                          tiny_mfcc: Path, tmp_path: Path) -> None:
    two = run(tiny_corpus, tiny_mfcc, tmp_path / "nj2", 2)
    assert two["stages"]["mono"]["jobs"] == 2
    assert_same(one_process, tmp_path / "nj2")
    for figures in (*two["stages"].values(), *two["splits"].values()):
        assert figures["cpu_seconds"] > 0 and figures["audio_hours"] > 0


def test_jobs_started_by_a_job_command_give_what_one_process_gives(
        one_process: Path, tiny_corpus: Path, tiny_mfcc: Path, tmp_path: Path) -> None:
    """``--job-cmd env``: each job a plain process of its own that reads its speakers'
    features and connects back over loopback, as a job on another host does."""
    out = tmp_path / "remote"
    two = run(tiny_corpus, tiny_mfcc, out, 2, "--job-cmd", "env", "--listen", "127.0.0.1")
    assert two["stages"]["mono"]["jobs"] == 2
    assert_same(one_process, out)
    for j in (1, 2):
        text = (out / "log" / f"align-worker.{j}.log").read_text()
        assert f"align-worker: job {j} on " in text and "connecting to 127.0.0.1:" in text
    assert not (out / ".align-worker.key").exists()
    assert two["stages"]["sat"]["cpu_seconds"] > 0
    stages = two["stages"]  # the jobs' and the parent's peak memory so far, reported by each stage
    assert stages["mono"]["job_peak_mb"] > 50 and stages["mono"]["parent_peak_mb"] > 50
    assert stages["sat"]["job_peak_mb"] >= stages["mono"]["job_peak_mb"]


def test_speakers_stay_whole_and_jobs_balance_by_frames() -> None:
    frames = {"a": 900, "b": 500, "c": 450, "d": 100}
    utt2spk = {f"{s}{i}": s for s in frames for i in range(2)}
    feats = {u: np.zeros((frames[s] // 2, 1), np.float32) for u, s in utt2spk.items()}
    utts = Utterances(Path("."), feats, {}, utt2spk)
    parts = split_speakers(utts, 2)
    assert [sorted({utt2spk[u] for u in p}) for p in parts] == [["a", "d"], ["b", "c"]]
    assert len(split_speakers(utts, 9)) == 4   # one job per speaker
