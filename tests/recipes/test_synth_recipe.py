"""recipes/synth/run.sh end to end at a tiny size, from a copy of the recipe in a tmp dir:
corpus, features, i-vectors and fMLLR, lang, archives, H-ADPSGD on 2 learners, decode,
score; then a rerun that skips every stage."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TINY = {  # a minute of speech, 4 speakers; a 1-layer BLSTM of 16 cells for one epoch
    "hours": 1 / 60, "speakers": 4, "dev_speakers": 1, "test_speakers": 1, "lm_sentences": 500,
    "synth_nj": 2, "feat_nj": 1, "ubm_components": 8, "ivector_iters": 2, "fmllr_gmm_components": 8,
    "num_pdfs": 100, "hidden": 16, "layers": 1, "proj": 0, "epochs": 1, "batch": 16, "base_batch": 16,
    "lr": 0.5, "warmup_epochs": 0, "strategy": "h-adpsgd", "nproc": 2, "group_size": 1,
    "lmwt": "9:10", "decode_nj": 1,
}
STAGES = ["corpus", "logmel-train", "mfcc-train", "logmel-dev", "mfcc-dev", "logmel-test", "mfcc-test",
          "ivectors-train", "fmllr-train", "ivectors-dev", "fmllr-dev", "ivectors-test", "fmllr-test",
          "lang", "archive-train", "archive-dev", "archive-test", "train", "decode-dev", "decode-test",
          "export"]


def copy_recipe(work: Path) -> Path:
    """recipes/synth (without its data/exp) and recipes/utils under ``work``."""
    for name in ("synth", "utils"):
        shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name,
                        ignore=shutil.ignore_patterns("data", "exp"))
    conf = work / "recipes" / "synth" / "conf" / "tiny.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in TINY.items()))
    return work / "recipes" / "synth" / "run.sh"


def run(script: Path, *args: str) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    proc = subprocess.run(["bash", str(script), "--config", "conf/tiny.conf", *args], capture_output=True,
                          text=True, timeout=1500, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_synth_recipe_end_to_end_then_skips(tmp_path: Path) -> None:
    script = copy_recipe(tmp_path)
    out = run(script)
    model = script.parent / "exp" / "blstm_h-adpsgd"
    best = (model / "decode_test" / "dev_picked_wer").read_text().splitlines()[0]
    wer = re.match(r"%WER (\d+\.\d+) \[ (\d+) / (\d+), \d+ ins, \d+ del, \d+ sub \]", best)
    assert wer, best
    n_words = sum(len(line.split()) - 1 for line in
                  (script.parent / "data/corpus/test/text").read_text().splitlines())
    assert int(wer.group(3)) == n_words  # every test word scored
    print(f"\nsynth tiny: {best}")  # the figure for the notes (-s)
    # The range this size reaches: measured 100.00 [ 61 / 61, 0 ins, 57 del, 4 sub ] (2026-11-28,
    # one epoch of a 16-cell BLSTM on a minute of speech says almost nothing). Above 100 means
    # insertions (scores or priors gone wrong); far below, a scorer that stopped counting.
    assert 80.0 <= float(wer.group(1)) <= 100.0, best
    # the end of the output: the report at the setting picked on dev, with its WER
    header = "Test speakers, h-adpsgd on 2 learners, at the setting picked on dev:"
    assert header in out
    report = out[out.index(header):]
    assert f"Kaldi compute-wer (Levenshtein):  {wer.group(0)}" in report
    assert "already complete" not in out
    final = (model / "final.pt").stat().st_mtime

    again = run(script)
    for name in STAGES:
        assert re.search(rf"\] {name}: already complete", again), name
    assert again.count("already complete") == len(STAGES)
    assert (model / "final.pt").stat().st_mtime == final
    assert again[again.index(header):] == report


@pytest.mark.slow
def test_synth_recipe_on_learned_alignments(tmp_path: Path) -> None:
    """The same recipe with --alignments learned: the corpus aligned from nothing
    (mono → tri → LDA+MLLT → SAT), its exact alignments used only to measure the learned
    ones, then lang, archives, training and a WER, all under *_learned names."""
    import json

    script = copy_recipe(tmp_path)
    conf = script.parent / "conf" / "tiny.conf"
    # six minutes of speech: a minute is too little for a flat start
    conf.write_text(conf.read_text() + "hours=0.1\nspeakers=8\nali_mono_gauss=300\n"
                    "ali_leaves=150\nali_gauss=600\nali_iters=6\n"
                    # an unseen test voice may lose an utterance of 12 to so little training
                    "ali_max_lost=0.2\n")
    out = run(script, "--alignments", "learned")
    root = script.parent
    report = json.loads((root / "exp" / "ali" / "report.json").read_text())
    assert list(report["stages"]) == ["mono", "tri", "lda", "sat"]
    assert report["splits"]["train"]["lost"] == {}
    assert report["stages"]["sat"]["agreement"]["within_20ms"] > 0.6
    assert (root / "data" / "lang_learned" / "graph" / "HCLG.fst").exists()
    assert not (root / "data" / "lang").exists()           # the exact path was not taken
    best = (root / "exp" / "blstm_h-adpsgd_learned" / "decode_test" / "best_wer").read_text()
    assert re.match(r"%WER \d+\.\d+ \[ \d+ / \d+,", best), best
    print(f"\nsynth learned: {best}")  # the figure for the notes (-s)
    assert "align: asrtrain prepare align" in out
