"""recipes/swbd/run.sh on the embedded corpus laid out as a Kaldi Switchboard setup.

The Kaldi side is made with asrtrain's own commands: fMLLR feats.scp, online
i-vectors (one row every 10 frames), pdf alignments and a graph with pdf+1 input
labels (``prepare lang``), the train/dev data dirs, and an eval2000-like eval dir:
one recording per speaker (the speaker's utterances end to end), ``segments`` and
``reco2file_and_channel``, with an STM in recording time and a GLM. The recipe then
runs stages 1..7 (tiny BLSTM, one epoch, 2 ADPSGD learners), reruns (every stage
skips), and restarts from training with ``--stage 5 --force true``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "swbd" / "run.sh"
ASRTRAIN = str(Path(sys.executable).parent / "asrtrain")
SR = 16000


def asrtrain(*args: object) -> None:
    proc = subprocess.run([ASRTRAIN, *map(str, args)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, f"asrtrain {args[:2]}: {proc.stderr[-3000:]}"


def read_table(path: Path) -> list[tuple[str, str]]:
    """Kaldi table lines as (key, rest)."""
    return [(line.split(maxsplit=1) + [""])[:2] for line in path.read_text().splitlines() if line.strip()]


def eval_dir_with_recordings(split: Path, out: Path, ref: Path) -> None:
    """``split`` as eval2000 is laid out: a recording per speaker (file ``en_<n>``, channel A),
    utterances as segments of it; ``ref``/stm (the reference in recording time) and ref/glm.

    (Kaldi keeps stm and glm inside data/eval2000, but ``prepare features`` cannot copy
    them yet: see test_features_copes_with_stm_and_glm_in_the_data_dir.)"""
    import soundfile as sf

    out.mkdir(parents=True)
    ref.mkdir(parents=True)
    wavs = dict(read_table(split / "wav.scp"))
    text = dict(read_table(split / "text"))
    segments, stm, scp, r2fc = [], [], [], []
    for spk, utts in read_table(split / "spk2utt"):
        reco, start = f"{spk}-A", 0
        fname = f"en_{spk.split('-')[-1]}"
        audio = []
        for utt in utts.split():
            x, sr = sf.read(wavs[utt], dtype="int16")
            assert sr == SR
            end = start + len(x)
            segments.append(f"{utt} {reco} {start / SR:.7f} {end / SR:.7f}")
            stm.append(f"{fname} A {spk} {start / SR:.3f} {end / SR:.3f} {text[utt]}")
            audio.append(x)
            start = end + SR // 2  # half a second of silence between turns
            audio.append(np.zeros(SR // 2, dtype=np.int16))
        path = out / "wav" / f"{reco}.wav"
        path.parent.mkdir(exist_ok=True)
        sf.write(path, np.concatenate(audio), SR)
        scp.append(f"{reco} {path}")
        r2fc.append(f"{reco} {fname} A")
    (out / "segments").write_text("\n".join(sorted(segments)) + "\n")
    (out / "wav.scp").write_text("\n".join(sorted(scp)) + "\n")
    (out / "reco2file_and_channel").write_text("\n".join(sorted(r2fc)) + "\n")
    (ref / "stm").write_text(";; eval2000-like STM of the test speakers\n" + "\n".join(sorted(stm)) + "\n")
    for name in ("text", "utt2spk", "spk2utt", "spk2gender"):
        shutil.copy(split / name, out / name)
    (ref / "glm").write_text(
        ";; sclite GLM\n* name \"tiny.glm\"\n* format = 'NIST1'\n* copy_no_hit = 'T'\n"
        "* case_sensitive = 'F'\nOK => O. K. / [ ] __ [ ]\nDON'T => [DO NOT] / [ ] __ [ ]\n")


@pytest.fixture(scope="module")
def kaldi_setup(tiny_corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Kaldi s5c-like tree made from tiny_corpus; returns the conf file pointing at it."""
    k = tmp_path_factory.mktemp("kaldi_s5c")
    for split in ("train", "dev", "test"):
        asrtrain("prepare", "features", tiny_corpus / split, k / "mfcc" / split, "--type", "mfcc", "--nj", "1")
    asrtrain("prepare", "ivectors", k / "mfcc/train", k / "ivectors/train", "--ubm-components", "8",
             "--dim", "100", "--period", "10", "--online", "--iters", "2")
    asrtrain("prepare", "fmllr", k / "mfcc/train", k / "fmllr/train", "--ali", tiny_corpus / "train/ali.scp",
             "--gmm-components", "8")
    for split in ("dev", "test"):
        asrtrain("prepare", "ivectors", k / "mfcc" / split, k / "ivectors" / split, "--extractor",
                 k / "ivectors/train", "--period", "10", "--online")
        asrtrain("prepare", "fmllr", k / "mfcc" / split, k / "fmllr" / split, "--model", k / "fmllr/train")
    lang = k / "lang"
    asrtrain("prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", tiny_corpus, lang,
             "--num-pdfs", "100")
    eval_dir_with_recordings(tiny_corpus / "test", k / "data" / "eval2000", k / "data" / "eval2000_ref")
    conf = {
        "train_fmllr_scp": k / "fmllr/train/feats.scp", "train_ivector_scp": k / "ivectors/train/ivectors.scp",
        "train_data_dir": tiny_corpus / "train", "train_pdf_ali_scp": lang / "pdf_ali/train.scp",
        "dev_fmllr_scp": k / "fmllr/dev/feats.scp", "dev_ivector_scp": k / "ivectors/dev/ivectors.scp",
        "dev_data_dir": tiny_corpus / "dev", "dev_pdf_ali_scp": lang / "pdf_ali/dev.scp",
        "eval_fmllr_scp": k / "fmllr/test/feats.scp", "eval_ivector_scp": k / "ivectors/test/ivectors.scp",
        "eval_data_dir": k / "data/eval2000", "eval_stm": k / "data/eval2000_ref/stm",
        "eval_glm": k / "data/eval2000_ref/glm", "num_pdfs": (lang / "num_pdfs").read_text().strip(),
        "graph_dir": lang / "graph", "ivector_period": 10, "sample_rate": SR,
        "hidden": 16, "layers": 1, "proj": 0, "epochs": 1, "batch": 16, "base_batch": 16, "lr": 0.5,
        "warmup_epochs": 0, "strategy": "adpsgd", "nproc": 2, "lmwt": "9:10", "decode_nj": 2,
        "feat_nj": 1, "score_subsets": "'speaker4=en_0004'",
    }
    path = k / "tiny.conf"
    path.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    return path


def run_recipe(conf: Path, work: Path, *args: str) -> str:
    proc = subprocess.run(["bash", str(RECIPE), "--config", str(conf), "--data", str(work / "data"),
                           "--exp", str(work / "exp"), *args], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_swbd_recipe_on_a_kaldi_layout(kaldi_setup: Path, tmp_path: Path) -> None:
    from asrtrain.data.archive import Archive

    out = run_recipe(kaldi_setup, tmp_path)
    model = tmp_path / "exp" / "blstm_adpsgd"
    best = (model / "decode_eval" / "best_wer").read_text()
    assert re.match(r"%WER \d+\.\d+ \[ \d+ / \d+, \d+ ins, \d+ del, \d+ sub \]", best), best
    assert best.split("]")[0] in out  # the recipe prints it
    n_words = sum(len(t.split()) for _, t in read_table(kaldi_setup.parent / "data/eval2000/text"))
    assert f"/ {n_words}," in best  # every eval word scored from the STM
    # the CTMs went to recording time: file en_0004, channel A, starts past the first turn
    hyp = sorted((model / "decode_eval/scoring_stm/hyp").glob("*.txt"))[0].read_text().split("\n")
    assert all(line.split()[:2] == ["en_0004", "A"] for line in hyp if line)
    assert max(float(line.split()[2]) for line in hyp if line) > 5.0
    for split, utts in (("train", 11), ("dev", 4), ("eval", 4)):
        arc = Archive(tmp_path / "data" / "archives" / f"{split}.h5")
        assert arc.feat_dim == 260
        assert [(s["name"], s["dim"]) for s in arc.layout] == [("fmllr", 40), ("ivector", 100), ("logmel", 120)]
        assert len(arc.utterances) == utts
        assert (arc.num_pdfs is None) == (split == "eval")
    final_time = (model / "final.pt").stat().st_mtime

    again = run_recipe(kaldi_setup, tmp_path)
    for name in ("logmel-train", "logmel-dev", "logmel-eval", "archive-train", "archive-dev", "archive-eval",
                 "train", "decode-eval"):
        assert re.search(rf"{name}: already complete", again), name
    assert (model / "final.pt").stat().st_mtime == final_time
    assert best.split("]")[0] in again

    restart = run_recipe(kaldi_setup, tmp_path, "--stage", "5", "--force", "true")
    assert "stage 1" not in restart and "stage 4" not in restart and "already complete" not in restart
    assert "=== stage 5" in restart and "=== stage 7" in restart
    assert (model / "final.pt").stat().st_mtime > final_time
    assert (model / "decode_eval" / "best_wer").read_text().startswith("%WER")


def test_features_copes_with_stm_and_glm_in_the_data_dir(tiny_corpus: Path, tmp_path: Path) -> None:
    """Kaldi's data/eval2000 holds stm and glm beside wav.scp: features must pass them through."""
    data = tmp_path / "eval2000"
    shutil.copytree(tiny_corpus / "test", data, ignore=shutil.ignore_patterns("flac", "ali.*", "phone.ctm"))
    (data / "stm").write_text("en_4156 A en_4156_A 10.0 12.0 HELLO\nen_4156 A en_4156_A 13.0 14.0 BYE\n")
    (data / "glm").write_text(";; GLM\n* name \"x.glm\"\n* case_sensitive = 'F'\nOK => O. K. / [ ] __ [ ]\n")
    asrtrain("prepare", "features", data, tmp_path / "feats", "--type", "mfcc", "--nj", "1")
    assert (tmp_path / "feats" / "stm").read_text() == (data / "stm").read_text()
    assert (tmp_path / "feats" / "glm").read_text() == (data / "glm").read_text()


SHOW_TRANSITIONS = """Transition-state 1: phone = sil hmm-state = 0 pdf = 0
 Transition-id = 1 p = 0.75 [self-loop]
 Transition-id = 2 p = 0.25 [0 -> 1]
Transition-state 2: phone = sil hmm-state = 1 pdf = 3
 Transition-id = 3 p = 0.5 [self-loop]
 Transition-id = 4 p = 0.5 [1 -> 2]
Transition-state 3: phone = aa_B hmm-state = 0 forward-pdf = 5 self-loop-pdf = 7
 Transition-id = 5 p = 0.5 [self-loop]
 Transition-id = 6 p = 0.5 [0 -> 1]
"""


def test_stage3_maps_transition_ids_of_a_kaldi_model(tmp_path: Path) -> None:
    """Stage 3 turns show-transitions' listing into decode's --tid2pdf map (phone ids from
    phones.txt; a self-loop takes the self-loop pdf); an explicit --stage 3 redoes it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "show.txt").write_text(SHOW_TRANSITIONS)
    shim = bin_dir / "show-transitions"
    shim.write_text(f'#!/usr/bin/env bash\n[ -f "$1" ] && [ -f "$2" ] && cat {tmp_path / "show.txt"}\n')
    shim.chmod(0o755)
    (tmp_path / "phones.txt").write_text("<eps> 0\nsil 1\naa_B 2\n")
    (tmp_path / "final.mdl").write_text("model\n")
    required = ["train_fmllr_scp", "train_ivector_scp", "train_data_dir", "train_pdf_ali_scp", "dev_fmllr_scp",
                "dev_ivector_scp", "dev_data_dir", "dev_pdf_ali_scp", "eval_fmllr_scp", "eval_ivector_scp",
                "eval_data_dir", "num_pdfs", "graph_dir"]
    conf = tmp_path / "c.conf"
    conf.write_text("".join(f"{v}=unused\n" for v in required) +
                    f"kaldi_mdl={tmp_path / 'final.mdl'}\nkaldi_phones={tmp_path / 'phones.txt'}\n")
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    cmd = ["bash", str(RECIPE), "--config", str(conf), "--data", str(tmp_path / "data"), "--exp",
           str(tmp_path / "exp"), "--stage", "3", "--stop-stage", "3"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "data/graph_map/tid2pdf").read_text().splitlines() == [
        "1 0 1 0", "2 0 1 0", "3 3 1 1", "4 3 1 1", "5 7 2 0", "6 5 2 0"]
    first = (tmp_path / "data/graph_map/tid2pdf").read_text()
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and "already complete" not in again.stdout
    assert "graph-map: tid2pdf" in again.stdout
    assert (tmp_path / "data/graph_map/tid2pdf").read_text() == first

    (tmp_path / "phones.txt").write_text("<eps> 0\nsil 1\n")  # aa_B missing: an error, no map
    proc = subprocess.run([*cmd, "--data", str(tmp_path / "data2")], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode != 0 and "phone aa_B is not in" in proc.stderr
    assert not (tmp_path / "data2/graph_map/tid2pdf").exists()


def test_missing_kaldi_inputs_are_named(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(RECIPE), "--data", str(tmp_path / "d")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "--train-fmllr-scp is required" in proc.stderr
    assert not (tmp_path / "d").exists()
