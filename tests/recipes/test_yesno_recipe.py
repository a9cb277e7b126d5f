"""recipes/yesno/run.sh on Kaldi's yesno WAVs, from a copy of the recipe in a tmp dir: the
data dirs and 8 kHz features (fast), and the whole recipe to its WER of 0.00% on the 29
test utterances (about 45 s on 2 cores, in `make test`: real speech from nothing is what
the flat start exists for), then a rerun that skips every stage.

The corpus is $ASRTRAIN_YESNO, else ../shared/data/yesno beside the repository (the 60 WAVs
of openslr.org/resources/1); the tests skip without it, and fail under CI=true.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import wave
from pathlib import Path

import kaldiio
import pytest
from needs import yesno_corpus, yesno_missing, yesno_wavs

ROOT = Path(__file__).resolve().parents[2]
CORPUS = yesno_corpus()
WAVS = [p.name for p in yesno_wavs()]
N_TRAIN, N_TEST, TEST_WORDS = 31, 29, 232

pytestmark = pytest.mark.needs(yesno_missing(N_TRAIN + N_TEST))

STAGES = ["data", "mfcc-train", "logmel-train", "mfcc-test", "logmel-test", "align",
          "ivectors-train", "fmllr-train", "ivectors-test", "fmllr-test", "lang",
          "archive-train", "archive-test", "train", "decode-test", "export"]


def copy_recipe(work: Path) -> Path:
    """recipes/yesno (without its data/exp) and recipes/utils under ``work``."""
    for name in ("yesno", "utils"):
        shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name,
                        ignore=shutil.ignore_patterns("data", "exp"))
    return work / "recipes" / "yesno" / "run.sh"


def run(script: Path, *args: str) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    cmd = ["bash", str(script), "--config", "conf/yesno.conf", "--yesno", str(CORPUS), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def table(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def kaldi_frames(wav: Path) -> int:
    """Frames of 25 ms every 10 ms at 8 kHz, as Kaldi counts them (snip-edges)."""
    with wave.open(str(wav)) as w:
        assert w.getframerate() == 8000, wav
        n = w.getnframes()
    return 1 + (n - 200) // 80


def test_yesno_data_and_8khz_features(tmp_path: Path) -> None:
    script = copy_recipe(tmp_path)
    run(script, "--stop-stage", "1")
    data = script.parent / "data"
    words = {"0": "NO", "1": "YES"}
    for split, names in (("train", WAVS[:N_TRAIN]), ("test", WAVS[N_TRAIN:])):
        d = data / split
        utts = [n.removesuffix(".wav") for n in names]
        for name in ("wav.scp", "text", "utt2spk"):  # C-sorted, one line per utterance
            keys = [row[0] for row in table(d / name)]
            assert keys == sorted(keys, key=lambda k: k.encode()) == utts, (split, name)
        assert [row[1] for row in table(d / "wav.scp")] == [str(CORPUS / n) for n in names]
        assert table(d / "text") == [[u, *(words[c] for c in u.split("_"))] for u in utts]
        assert table(d / "spk2utt") == [["global", *utts]]
        for kind, dim in (("mfcc", 13), ("logmel", 120)):
            feats = data / kind / split
            frames = {u: int(n) for u, n in table(feats / "utt2num_frames")}
            expected = {u: kaldi_frames(CORPUS / n) for u, n in zip(utts, names, strict=True)}
            assert frames == expected, (kind, split)
            mats = kaldiio.load_scp(str(feats / "feats.scp"))
            assert {u: mats[u].shape for u in utts} == {u: (frames[u], dim) for u in utts}
    assert sum(len(row) - 1 for row in table(data / "test" / "text")) == TEST_WORDS
    dict_dir = data / "dict"
    assert table(dict_dir / "lexicon.txt") == [["NO", "n"], ["YES", "y"]]
    assert (dict_dir / "nonsilence_phones.txt").read_text().split() == ["n", "y"]
    assert (dict_dir / "silence_phones.txt").read_text().split() == ["sil"]
    assert (dict_dir / "optional_silence.txt").read_text().split() == ["sil"]
    assert table(data / "lm_text") == [row[1:] for row in table(data / "train" / "text")]


@pytest.mark.slow  # 80 s; make test runs yesno to 0.00% through recipes/custom (test_custom_recipe.py)
def test_yesno_recipe_reaches_zero_wer_then_skips(tmp_path: Path) -> None:
    script = copy_recipe(tmp_path)
    out = run(script)
    decode = script.parent / "exp" / "blstm_single" / "decode_test"
    best = (decode / "best_wer").read_text().strip()
    wer = re.match(r"%WER (\d+\.\d+) \[ (\d+) / (\d+), (\d+) ins, (\d+) del, (\d+) sub \]", best)
    assert wer, best
    n_words = sum(len(row) - 1 for row in table(script.parent / "data" / "test" / "text"))
    assert int(wer.group(3)) == n_words == TEST_WORDS  # every test word scored
    assert wer.group(1) == "0.00" and wer.group(2) == "0", best
    lmwt = best.split("wer_")[-1]
    header = f"Test utterances, best LM weight on test (oracle) ({lmwt}), single on 1 learners:"
    assert header in out
    report = out[out.index(header):]
    assert f"Kaldi compute-wer (Levenshtein):  {wer.group(0)}" in report
    assert "already complete" not in out
    final = (script.parent / "exp" / "blstm_single" / "final.pt").stat().st_mtime

    again = run(script)
    for name in STAGES:
        assert re.search(rf"\] {name}: already complete", again), name
    assert again.count("already complete") == len(STAGES)
    assert (script.parent / "exp" / "blstm_single" / "final.pt").stat().st_mtime == final
    report_again = again[again.index(header):]
    assert report_again.split("\n[")[0] == report.split("\n[")[0]  # the same report, timings aside
