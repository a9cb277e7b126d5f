"""``asrtrain train-seq``: MMI on the lattices ``decode --lattices`` kept of the training archive.

The model of the ``trained`` fixture is decoded on its own training archive (the denominator
lattices), trained two epochs with MMI through the CLI, and must (a) raise the MMI objective
the trainer's own code computes, (b) stay a ``final.pt`` that ``decode`` reads, with the
priors and metadata of the model it started from, and (c) refuse lattices it cannot read as pdfs.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli.main import cli


def _cli(*args: object) -> str:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


@pytest.fixture(scope="module")
def denlats(trained, mini_lang_dec, tmp_path_factory):
    final, _, _ = trained
    out = tmp_path_factory.mktemp("denlats") / "dec"
    _cli("decode", final, mini_lang_dec / "graph", final.parent / "train.h5", out, "--nj", "1",
         "--lattices", "--lmwt", "10", "--lattice-beam", "6")
    return out


def test_mmi_raises_its_objective_and_keeps_a_decodable_model(trained, denlats, mini_lang_dec, tmp_path):
    from asrtrain.model.io import load_final
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, dev, _ = trained
    train = final.parent / "train.h5"
    out = tmp_path / "mmi"
    printed = _cli("train-seq", final, train, denlats, out, "--valid", train, "--epochs", "2",
                   "--lr", "0.5", "--ce-weight", "0", "--threads", "1")
    assert "MMI-trained" in printed
    assert {p.name for p in out.glob("*.pt")} == {"epoch1.pt", "epoch2.pt", "final.pt", "state.pt"}
    cfg = SequenceConfig()
    before = SequenceTrainer(final, train, denlats, tmp_path / "x", cfg).objective()
    after = SequenceTrainer(out / "final.pt", train, denlats, tmp_path / "y", cfg).objective()
    assert after > before + 1e-4, (before, after)  # 0.3675 -> 0.3683: the lattices are almost right already
    old, new = load_final(final), load_final(out / "final.pt")
    np.testing.assert_allclose(new.priors, old.priors)
    assert new.layout == old.layout
    history = new.meta["sequence"]["history"]
    assert [row["epoch"] for row in history] == [0, 1, 2]
    assert history[0]["diagnostic_objective"] == pytest.approx(before, rel=1e-5)
    assert history[-1]["diagnostic_objective"] == pytest.approx(after, rel=1e-5)
    assert all("valid_loss" in row for row in history)
    _cli("decode", out / "final.pt", mini_lang_dec / "graph", dev, tmp_path / "dec", "--nj", "1", "--lmwt", "10")
    assert (tmp_path / "dec" / "hyp" / "10.txt").read_text()


def test_lattices_it_cannot_read_are_refused(trained, denlats, tmp_path):
    final, _, _ = trained
    train = final.parent / "train.h5"
    empty = tmp_path / "empty"
    empty.mkdir()
    res = CliRunner().invoke(cli, ["train-seq", str(final), str(train), str(empty), str(tmp_path / "o")])
    assert res.exit_code == 1 and "no lattice archives" in res.output and str(empty) in res.output
    kaldi = tmp_path / "kaldi"
    shutil.copytree(denlats / "lat", kaldi / "lat")  # no pdf_map_id: labels may be transition-ids
    res = CliRunner().invoke(cli, ["train-seq", str(final), str(train), str(kaldi), str(tmp_path / "o")])
    assert res.exit_code == 1 and "Kaldi graph" in res.output
    assert not (tmp_path / "o" / "final.pt").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: MMI with the network on cuda")
def test_mmi_on_the_gpu_matches_the_cpu(trained, denlats, tmp_path):
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, _, _ = trained
    train = final.parent / "train.h5"
    cpu = SequenceTrainer(final, train, denlats, tmp_path / "c", SequenceConfig(), device="cpu").objective()
    gpu = SequenceTrainer(final, train, denlats, tmp_path / "g", SequenceConfig(), device="cuda").objective()
    assert gpu == pytest.approx(cpu, rel=1e-4)


def test_lattices_of_another_tree_are_refused(trained, denlats, tmp_path):
    final, _, _ = trained
    other = tmp_path / "other"
    shutil.copytree(denlats, other)
    (other / "pdf_map_id").write_text("0123456789abcdef\n")  # as a graph of another tree writes
    res = CliRunner().invoke(cli, ["train-seq", str(final), str(final.parent / "train.h5"), str(other),
                                   str(tmp_path / "o")])
    assert res.exit_code == 1 and "another tree" in res.output, res.output


def test_a_run_continued_after_an_epoch_ends_where_an_unbroken_one_does(trained, denlats, tmp_path):
    import torch

    final, _, _ = trained
    train = final.parent / "train.h5"
    args = [final, train, denlats]
    opts = ["--lr", "0.05", "--threads", "1", "--utts-per-step", "2"]
    _cli("train-seq", *args, tmp_path / "straight", "--epochs", "2", *opts)
    _cli("train-seq", *args, tmp_path / "broken", "--epochs", "1", *opts)  # as if killed in epoch 2
    printed = _cli("train-seq", *args, tmp_path / "broken", "--epochs", "2", *opts)
    assert "resuming after epoch 1" in printed
    a = torch.load(tmp_path / "straight" / "final.pt", weights_only=True)
    b = torch.load(tmp_path / "broken" / "final.pt", weights_only=True)
    for name, value in a["state_dict"].items():
        assert torch.equal(value, b["state_dict"][name]), name
    assert [row["diagnostic_objective"] for row in a["meta"]["sequence"]["history"]] == \
        [row["diagnostic_objective"] for row in b["meta"]["sequence"]["history"]]
    res = CliRunner().invoke(cli, ["train-seq", *map(str, args), str(tmp_path / "broken"), "--epochs", "3",
                                   "--lr", "0.01"])
    assert res.exit_code == 1 and "--lr 0.05 (now 0.01), --utts-per-step 2 (now 4)" in res.output, res.output


def test_the_objective_is_measured_on_a_fixed_sample_whatever_the_seed(trained, denlats, tmp_path):
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, _, _ = trained
    train = final.parent / "train.h5"
    one = SequenceTrainer(final, train, denlats, tmp_path / "a", SequenceConfig(diagnostic_utts=3, seed=0))
    two = SequenceTrainer(final, train, denlats, tmp_path / "b", SequenceConfig(diagnostic_utts=3, seed=7))
    assert len(one.diagnostic) == 3 < len(one.utts)
    assert one.diagnostic == two.diagnostic and set(one.diagnostic) <= set(one.utts)
    assert len(SequenceTrainer(final, train, denlats, tmp_path / "c", SequenceConfig()).diagnostic) == len(one.utts)
