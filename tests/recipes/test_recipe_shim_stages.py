"""What recipes/custom's stages run, in order, with an ``asrtrain`` shim first on PATH that
records each command (and does nothing), the sizes written as the rule writes them.

The lang stage: the rule's question tree needs a context-dependent rung, so a ladder that
stops at mono falls back to a count tree, said in the log, while an explicit ``--hybrid-tree
questions`` there is a one-line error. ``--realign true``: after training, the network
realigns train and dev, and the lang (the same tree), the archives and a second network are
built on its alignments; decode reads the second network, also in a run resumed later, and
decodes the first one beside it (the score stage prints its line before the second's)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = r"""#!/usr/bin/env bash
printf "%s\n" "$*" >> "$ASRTRAIN_SHIM_LOG"
if [ "$1 $2" = "score --sweep" ]; then   # what the score stage reads back: a WER per decode dir
  d=$3 n=$(( $(wc -l < "$ASRTRAIN_SHIM_LOG") ))
  mkdir -p "$d/score/9_0.0"
  echo "%WER $n.00 [ $n / 100, 0 ins, 0 del, $n sub ] $d/wer_9_0.0" > "$d/dev_picked_wer"
  cp "$d/dev_picked_wer" "$d/best_wer"
  echo "summary of $d" > "$d/score/9_0.0/summary.txt"
fi
"""
SIZES = """hours=0.6
ali_mono_gauss=1000
ali_leaves=250
ali_gauss=1500
num_pdfs=500
hidden=160
layers=3
proj=80
epochs=12
batch=16
base_batch=128
lr=0.5
lr_schedule=plateau
plateau_stop=3
select=average:3
ubm_components=64
fmllr_gmm_components=64
ivector_dim=100
streams=logmel
fmllr_source=global
hybrid_tree=questions
lfmmi=false
context=0
dropout=0.0
spec_augment=off
lfmmi_utts_per_step=8
lm_order=2
strategy=single
nproc=1
lfmmi_nproc=2
members=1
"""


def run_stages(work: Path, first: int, last: int, *extra: str
               ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Stages FIRST to LAST of a copy of recipes/custom (made once in WORK); the asrtrain
    commands that run ran."""
    if not (work / "recipes").exists():
        for name in ("custom", "utils"):
            shutil.copytree(ROOT / "recipes" / name, work / "recipes" / name,
                            ignore=shutil.ignore_patterns("data", "exp"))
        for d in ("train", "test", "dict"):
            (work / d).mkdir()
        (work / "lm_text").write_text("a b\n")
        (work / "data").mkdir()
        (work / "data" / "sizes.sh").write_text(SIZES)
        bin_dir = work / "bin"
        bin_dir.mkdir()
        (bin_dir / "asrtrain").write_text(SHIM)
        (bin_dir / "asrtrain").chmod(0o755)
    log = work / "commands.txt"
    log.write_text("")
    cmd = ["bash", str(work / "recipes" / "custom" / "run.sh"), "--train", str(work / "train"),
           "--test", str(work / "test"), "--dict", str(work / "dict"), "--lm-text",
           str(work / "lm_text"), "--data", str(work / "data"), "--exp", str(work / "exp"),
           "--stage", str(first), "--stop-stage", str(last), "--gmm-rungs", "none", *extra]
    env = dict(os.environ, PATH=f"{work / 'bin'}:/usr/bin:/bin", ASRTRAIN_SHIM_LOG=str(log))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60,
                          cwd=work / "recipes" / "custom")
    return proc, log.read_text().splitlines()


def lang_stage(work: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    return run_stages(work, 4, 4, *extra)


def test_the_rule_grows_a_question_tree_on_the_sat_rung(tmp_path: Path) -> None:
    proc, commands = lang_stage(tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert commands[0].startswith("prepare tree ") and "--leaves 500" in commands[0]
    assert commands[1].startswith("prepare lang ") and "exp/tree/network.pt" in commands[1]


def test_a_mono_ladder_falls_back_to_a_count_tree_and_says_so(tmp_path: Path) -> None:
    proc, commands = lang_stage(tmp_path, "--ali-stages", "mono")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "stops at mono" in proc.stdout and "--hybrid-tree counts" in proc.stdout
    assert len(commands) == 1 and commands[0].startswith("prepare lang ")
    assert "--num-pdfs 500" in commands[0] and "--tree" not in commands[0]


def test_an_explicit_question_tree_on_a_mono_ladder_is_one_error_line(tmp_path: Path) -> None:
    proc, commands = lang_stage(tmp_path, "--ali-stages", "mono", "--hybrid-tree", "questions")
    assert proc.returncode != 0 and not commands
    errors = [ln for ln in proc.stderr.splitlines() if "context-dependent rung" in ln]
    assert len(errors) == 1 and "--hybrid-tree counts" in errors[0]


def test_realign_trains_a_second_network_on_the_networks_alignments(tmp_path: Path) -> None:
    proc, commands = run_stages(tmp_path, 6, 6, "--realign", "true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    exp, data = tmp_path / "exp", tmp_path / "data"
    verbs = [" ".join(c.split()[:2]) for c in commands]
    assert verbs == ["train " + str(data / "archives/train.h5"), "prepare realign",
                     "prepare lang", "prepare archive", "prepare archive",
                     "train " + str(data / "archives_nnet/train.h5")], verbs
    # test has no targets: the first network's archive serves the second as it is
    assert (data / "archives_nnet/test.h5").resolve() == (data / "archives/test.h5").resolve()
    assert (data / "archives_nnet/test.h5").is_symlink()
    realign = commands[1].split()
    assert realign[2:6] == [str(exp / "blstm/final.pt"), str(data / "lang"), str(exp / "ali"),
                            str(exp / "ali_nnet")]
    assert f"train={data / 'archives/train.h5'}" in realign
    assert f"dev={data / 'archives/dev.h5'}" in realign
    lang = commands[2].split()
    assert str(exp / "ali_nnet") in lang and str(data / "lang_nnet") in lang
    assert lang[lang.index("--tree") + 1] == str(exp / "tree/network.pt")   # the same tree
    assert all(str(data / "lang_nnet/pdf_ali") in c for c in commands[3:5])
    assert str(exp / "blstm_nnet") in commands[5].split()


def test_a_run_resumed_after_realign_decodes_the_second_network(tmp_path: Path) -> None:
    proc, commands = run_stages(tmp_path, 7, 7, "--realign", "true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data, exp = tmp_path / "data", tmp_path / "exp"
    decodes = [c.split() for c in commands if c.startswith("decode ")]
    assert len(decodes) == 4    # dev and test, the first network's (to compare), then the second's
    for d in decodes[:2]:
        assert d[1:4] == [str(exp / "blstm/final.pt"), str(data / "lang/graph"),
                          str(data / f"archives/{Path(d[3]).name}")]
    for d in decodes[2:]:
        assert d[1:4] == [str(exp / "blstm_nnet/final.pt"), str(data / "lang_nnet/graph"),
                          str(data / f"archives_nnet/{Path(d[3]).name}")]
    assert [Path(d[3]).name for d in decodes] == ["dev.h5", "test.h5"] * 2
    proc, commands = run_stages(tmp_path, 7, 7)     # without it: the first network
    assert all(str(exp / "blstm/final.pt") in c for c in commands if c.startswith("decode "))


def test_score_reports_the_first_network_before_the_second(tmp_path: Path) -> None:
    """With --realign true the score stage prints the first network's dev-picked line before
    the report whose last line is the second network's test WER."""
    run_stages(tmp_path, 7, 7)     # makes the copy; the test split gets a transcript
    (tmp_path / "test" / "text").write_text("u1 a b\n")
    proc, commands = run_stages(tmp_path, 8, 8, "--realign", "true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    exp = tmp_path / "exp"
    scores = [c.split() for c in commands if c.startswith("score ")]
    assert [c[2] for c in scores] == [str(exp / "blstm/decode_test"), str(exp / "blstm_nnet/decode_test")]
    assert all(c[c.index("--pick-on") + 1].endswith("/decode_dev") for c in scores)
    lines = proc.stdout.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("blstm on the ladder's alignments: %WER 1.00"))
    assert lines[-1].startswith("%WER 2.00") and first < len(lines) - 1


def test_lfmmi_trains_the_network_further_and_decodes_both(tmp_path: Path) -> None:
    """--lfmmi true: after training, a den graph of the ladder's alignments on the lang's tree
    and train-seq against it into blstm_lfmmi; a run resumed later decodes the cross-entropy
    network and then the lattice-free one, whose report is the last."""
    proc, commands = run_stages(tmp_path, 6, 6, "--lfmmi", "true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    exp, data = tmp_path / "exp", tmp_path / "data"
    assert [" ".join(c.split()[:2]) for c in commands] == [
        "train " + str(data / "archives/train.h5"), "prepare den-graph", "train-seq " + str(exp / "blstm/final.pt")]
    assert commands[1].split()[2:5] == [str(data / "lang"), str(exp / "ali"), str(exp / "den/den.npz")]
    seq = commands[2].split()
    assert seq[2:5] == [str(data / "archives/train.h5"), str(exp / "den/den.npz"), str(exp / "blstm_lfmmi")]
    assert seq[seq.index("--epochs") + 1] == "2" and seq[seq.index("--valid") + 1] == str(data / "archives/dev.h5")
    assert seq[seq.index("--utts-per-step") + 1] == "8"   # the sizes rule's (as measured on speechocean762)
    assert seq[seq.index("--nproc") + 1] == "2"   # the rule's learners for this machine
    proc, commands = run_stages(tmp_path, 7, 7, "--lfmmi", "true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    decodes = [c.split() for c in commands if c.startswith("decode ")]
    assert [d[1] for d in decodes] == [str(exp / "blstm/final.pt")] * 2 + [str(exp / "blstm_lfmmi/final.pt")] * 2
    assert all(d[2] == str(data / "lang/graph") for d in decodes)


def test_lfmmi_after_realign_starts_from_the_second_network(tmp_path: Path) -> None:
    proc, commands = run_stages(tmp_path, 6, 6, "--lfmmi", "true", "--realign", "true")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    exp, data = tmp_path / "exp", tmp_path / "data"
    den = next(c.split() for c in commands if c.startswith("prepare den-graph"))
    assert den[2:5] == [str(data / "lang_nnet"), str(exp / "ali_nnet"), str(exp / "den_nnet/den.npz")]
    seq = commands[-1].split()
    assert seq[:3] == ["train-seq", str(exp / "blstm_nnet/final.pt"), str(data / "archives_nnet/train.h5")]
    assert seq[4] == str(exp / "blstm_nnet_lfmmi")


def test_the_sizes_rule_turns_lfmmi_on(tmp_path: Path) -> None:
    """recipes/custom's --lfmmi auto takes the rule's value from data/sizes.sh (true from 2 h)."""
    proc, commands = run_stages(tmp_path, 6, 6)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not any(c.startswith(("prepare den-graph", "train-seq")) for c in commands)   # the SIZES: false
    sizes = tmp_path / "data" / "sizes.sh"
    sizes.write_text(sizes.read_text().replace("lfmmi=false", "lfmmi=true"))
    proc, commands = run_stages(tmp_path, 6, 6)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert [" ".join(c.split()[:2]) for c in commands][-2:] == [
        "prepare den-graph", "train-seq " + str(tmp_path / "exp/blstm/final.pt")]
    sizes.write_text(sizes.read_text().replace("lfmmi=true\n", ""))   # a sizes.sh of before the rule
    proc, _ = run_stages(tmp_path, 6, 6)
    assert proc.returncode != 0 and "--lfmmi is auto" in proc.stderr
    sizes.write_text(sizes.read_text().replace("lfmmi_nproc=2\n", "") + "lfmmi=true\n")
    proc, _ = run_stages(tmp_path, 6, 6)   # the lfmmi stage again: its learners unknown
    assert proc.returncode != 0 and "--lfmmi-nproc is auto" in proc.stderr


def _train_option(work: Path, option: str, *extra: str) -> str:
    """The value of ``option`` stage 6 gives ``asrtrain train`` (a fresh exp each time)."""
    shutil.rmtree(work / "exp", ignore_errors=True)
    proc, commands = run_stages(work, 6, 6, *extra)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    train = commands[0].split()
    assert train[0] == "train"
    return train[train.index(option) + 1]


@pytest.mark.parametrize(("option", "name", "ruled", "asked"), [
    ("--context", "context", "10", "4"),
    ("--dropout", "dropout", "0.2", "0.1"),
    ("--spec-augment", "spec_augment", "F=2,f=8,T=2,t=5", "on"),
])
def test_the_rules_training_sizes_reach_train_and_an_option_overrides_them(
        tmp_path: Path, option: str, name: str, ruled: str, asked: str) -> None:
    off = _train_option(tmp_path, option)
    assert f"{name}={off}\n" in SIZES   # the fixture's value: off
    (tmp_path / "data" / "sizes.sh").write_text(SIZES.replace(f"{name}={off}\n", f"{name}={ruled}\n"))
    assert _train_option(tmp_path, option) == ruled
    assert _train_option(tmp_path, option, option, asked) == asked
