"""recipes/custom/run.sh: a user's own Kaldi data dirs to a dev-picked test WER, run from a
copy of the recipe in a tmp dir.

- yesno (real 8 kHz recordings; each utterance its own speaker, Kaldi's convention without
  speaker labels) to 0.00% WER at the dev-picked setting, the model exported at that setting
  (exp/model), then transcribe.sh (asrtrain transcribe on it) on its test recordings without
  their text;
- a synthesized corpus laid out as a user's data dir: 16 kHz FLAC files with a given dev
  dir, and 8 kHz through sox pipes in wav.scp with dev held out of train;
- bad input: a dev dir sharing a speaker with train, a sample rate that is not the audio's,
  a missing required option.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from needs import yesno_corpus, yesno_missing

from asrtrain.decode.grid import parse_setting
from asrtrain.transcribe import manifest

ROOT = Path(__file__).resolve().parents[2]
YESNO = yesno_corpus()
WER_LINE = re.compile(r"^%WER (\d+\.\d\d) \[ \d+ / \d+, \d+ ins, \d+ del, \d+ sub \]$")
needs_yesno = pytest.mark.needs(yesno_missing())


def copy_recipe(work: Path) -> Path:
    for name in ("custom", "utils", "yesno"):
        shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name,
                        ignore=shutil.ignore_patterns("data", "exp"))
    return work / "recipes" / "custom"


def run(script: Path, *args: object, ok: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    proc = subprocess.run(["bash", str(script), *map(str, args)], capture_output=True, text=True,
                          timeout=1500, env=env)
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def yesno_dirs(work: Path) -> Path:
    """yesno's train/test/dict/lm_text with each utterance its own speaker."""
    data = work / "yesno"
    subprocess.run(["bash", str(ROOT / "recipes/yesno/local/prepare_data.sh"), str(YESNO), str(data)],
                   check=True, capture_output=True)
    for split in ("train", "test"):
        utts = [ln.split()[0] for ln in (data / split / "wav.scp").read_text().splitlines()]
        table = "".join(f"{u} {u}\n" for u in utts)
        (data / split / "utt2spk").write_text(table)
        (data / split / "spk2utt").write_text(table)
    return data


def user_dir(corpus: Path, split: str, out: Path, rate: int | None = None) -> Path:
    """A synthesized split as a user's data dir: its files, or sox pipes resampling them."""
    out.mkdir(parents=True)
    for name in ("text", "utt2spk", "spk2utt"):
        shutil.copy(corpus / split / name, out / name)
    lines = []
    for line in (corpus / split / "wav.scp").read_text().splitlines():
        utt, path = line.split(maxsplit=1)
        lines.append(f"{utt} {path}" if rate is None else f"{utt} sox {path} -r {rate} -t wav - |")
    (out / "wav.scp").write_text("".join(f"{ln}\n" for ln in lines))
    return out


def last_wer(stdout: str) -> float:
    last = stdout.strip().splitlines()[-1]
    m = WER_LINE.match(last)
    assert m, f"the last line is not a WER line: {last!r}"
    return float(m.group(1))


@needs_yesno
def test_yesno_reaches_zero_wer_at_the_dev_picked_setting_then_transcribes(tmp_path: Path) -> None:
    recipe = copy_recipe(tmp_path)
    data = yesno_dirs(tmp_path)
    out = run(recipe / "run.sh", "--config", "conf/yesno.conf", "--train", data / "train",
              "--test", data / "test", "--dict", data / "dict", "--lm-text", data / "lm_text")
    assert "held out" in out.stdout + out.stderr
    assert last_wer(out.stdout) == 0.0
    # Kaldi's RESULTS lines, one per GMM rung, before the BLSTM's: yesno's monophones are
    # near Kaldi's own yesno result; the context-dependent rungs insert words on 3 minutes
    # of training speech (README "The GMM rungs on real speech")
    rungs = {m.group(1): float(m.group(2)) for m in
             re.finditer(r"^(mono|tri|lda|sat): %WER (\d+\.\d\d) ", out.stdout, re.M)}
    assert set(rungs) == {"mono", "tri", "lda", "sat"}, out.stdout[-2000:]
    assert rungs["mono"] <= 3.0 and rungs["sat"] <= 40.0, rungs
    picked = (recipe / "exp/blstm/decode_test/dev_picked_wer").read_text()
    assert "best on test (oracle)" in picked
    # every test word is in the LM text: the split by its vocabulary (the lang dir's list of the
    # words the LM was estimated from) says so
    assert re.search(r"^# reference words outside the LM text \(.*/lang\): 0 of \d+ \(0\.0%\)", picked, re.M), picked
    # the LM has the order the config asks for (yesno's unigram), not prepare lang's default
    assert json.loads((recipe / "data/lang/lm_report.json").read_text())["lm_order"] == 1
    # the last stage exported the model at the dev-picked setting; transcribe.sh reads it
    model = recipe / "exp/model"
    assert "=== stage 9: export" in out.stdout and "asrtrain transcribe exp/model" in out.stdout
    assert manifest.verify(model)["files"].keys() >= {"final.pt", "settings.json", "graph/HCLG.fst"}
    dev_best = (recipe / "exp/blstm/decode_dev/best_wer").read_text().split()[-1]
    decode = json.loads((model / "settings.json").read_text())["decode"]
    assert parse_setting(dev_best.split("wer_")[-1]) == (decode["lmwt"], decode["wip"])
    new = tmp_path / "new"
    new.mkdir()
    for name in ("wav.scp", "utt2spk", "spk2utt"):
        shutil.copy(data / "test" / name, new / name)
    run(recipe / "transcribe.sh", "--data", new, "--out", tmp_path / "hyp")
    assert (tmp_path / "hyp/ctm").read_text().strip()
    ref = dict(ln.split(maxsplit=1) for ln in (data / "test/text").read_text().splitlines())
    hyp = dict(ln.split(maxsplit=1) for ln in (tmp_path / "hyp/text").read_text().splitlines())
    assert hyp.keys() == ref.keys()
    assert sum(hyp[u] != ref[u] for u in ref) <= 1


@needs_yesno
def test_speed_perturbed_copies_for_the_network_only(tmp_path: Path) -> None:
    """--speed-perturb network (Kaldi's nnet recipes: the GMMs on the originals, data_sp aligned
    by the SAT GMM): the ladder trains on train alone, the 0.9 and 1.1 copies are aligned with
    the SAT rung and their fMLLR from their transcripts, train's archive holds all three, and
    the model trained on it is exported as any other (its joined tables name their parts)."""
    recipe = copy_recipe(tmp_path)
    data = yesno_dirs(tmp_path)
    out = run(recipe / "run.sh", "--config", "conf/yesno.conf", "--train", data / "train",
              "--test", data / "test", "--dict", data / "dict", "--lm-text", data / "lm_text",
              "--speed-perturb", "network", "--epochs", 5)
    print(f"\nyesno, copies for the network: {last_wer(out.stdout)}")
    report = json.loads((recipe / "exp/ali/report.json").read_text())
    train = (recipe / "data/train/utt2spk").read_text().splitlines()
    copies = (recipe / "data/train_sp_copies/utt2spk").read_text().splitlines()
    assert len(copies) == 2 * len(train)
    assert {ln.split("-")[0] for ln in copies} == {"sp0.9", "sp1.1"}
    assert report["splits"]["sp"]["training_copy"] is True
    assert report["splits"]["sp"]["aligned"] == len(copies)
    assert report["splits"]["train"]["aligned"] == len(train)   # the ladder: the originals only
    assert set(report["sat_fmllr"]) == {"train", "sp"}
    assert (recipe / "data/lang/pdf_ali/sp.scp").is_file()
    from asrtrain.data.archive import Archive
    with Archive(recipe / "data/archives/train.h5") as arch:
        names = [u[0] for u in arch.utterances]
        assert arch.has_targets and not arch.skipped
        tree = (recipe / "data/lang/pdf_ali/tree_id").read_text().strip()
        assert arch.h5.attrs["tree_id"] == tree   # what train checks against dev's
    assert len(names) == 3 * len(train) and len(set(names)) == len(names)
    with Archive(recipe / "data/archives/dev.h5") as arch:
        assert not any(u[0].startswith("sp") for u in arch.utterances)
    settings = json.loads((recipe / "exp/model/settings.json").read_text())
    assert [s["name"] for s in settings["streams"]] == ["fmllr", "logmel"]
    assert manifest.verify(recipe / "exp/model")["files"].keys() >= {"final.pt", "sat/sat.pt"}


@pytest.mark.slow
@pytest.mark.parametrize("rate", [16000, 8000])
def test_a_synthesized_corpus_laid_out_as_a_users_data_dirs(small_corpus: Path, tmp_path: Path,
                                                           rate: int) -> None:
    """Six minutes of speech (6 training speakers): the plumbing, not the quality (a short
    ladder, so an unseen voice may lose dev utterances: --ali-max-lost 0.5)."""
    recipe = copy_recipe(tmp_path)
    corpus = small_corpus
    pipe = None if rate == 16000 else rate
    train = user_dir(corpus, "train", tmp_path / "u/train", pipe)
    test = user_dir(corpus, "test", tmp_path / "u/test", pipe)
    dev = ["--dev", user_dir(corpus, "dev", tmp_path / "u/dev", pipe)] if rate == 16000 else []
    out = run(recipe / "run.sh", "--train", train, "--test", test, *dev, "--dict",
              corpus / "dict", "--lm-text", corpus / "lm_text", "--sample-rate", rate,
              "--strategy", "single", "--nproc", 1, "--ali-stages", "mono,tri",
              "--ali-iters", 5, "--mono-iters", 10, "--ali-max-lost", 0.5,
              # the ladder stops at tri, so the network's fMLLR stream cannot come from a SAT
              # first pass (the rule's source below 20 h): the global GMM's is the plumbing here
              "--fmllr-source", "global",
              # a smaller network than the rule's 3x160, for a test's time; the batch is the
              # rule's (16 on six minutes, its floor)
              "--epochs", 6, "--hidden", 96, "--layers", 2, "--proj", 48,
              # the rule's tree at 16 kHz (prepare tree's, twice the aligner's leaves); ~60 at 8
              *([] if rate == 16000 else ["--num-pdfs", 60]))
    print(f"\ncustom {rate}: {last_wer(out.stdout)}")  # the figure for the notes (-s)
    assert last_wer(out.stdout) < 100.0
    sizes = (recipe / "data/sizes.sh").read_text()
    assert re.search(r"^num_pdfs=\d+$", sizes, re.M)
    assert re.search(r"^hybrid_tree=questions$", sizes, re.M)   # the rule's, below 20 h
    assert (recipe / "exp/tree/network.pt").is_file()
    assert re.search(r"^batch=16$", sizes, re.M)
    assert not (recipe / "data/lang/pdf_ali/test.scp").exists()   # test never aligned
    assert (recipe / "data/dev").is_dir() == (not dev)


@needs_yesno
def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path: Path) -> None:
    recipe = copy_recipe(tmp_path)
    data = yesno_dirs(tmp_path)
    args = ["--config", "conf/yesno.conf", "--test", data / "test", "--dict", data / "dict",
            "--lm-text", data / "lm_text"]
    missing = run(recipe / "run.sh", *args, ok=False)
    assert missing.returncode == 2 and "--train is required" in missing.stderr
    shared = tmp_path / "dev"
    shutil.copytree(data / "train", shared)
    proc = run(recipe / "run.sh", *args, "--train", data / "train", "--dev", shared,
               "--stop-stage", 0, ok=False)
    assert proc.returncode != 0
    assert re.search(r"speaker.*0_0_0_0_1_1_1_1", proc.stderr)
    rate = run(recipe / "run.sh", *args, "--train", data / "train", "--sample-rate", 16000,
               "--stop-stage", 1, ok=False)
    assert rate.returncode != 0
    assert re.search(r"8000", rate.stderr), rate.stderr[-2000:]
