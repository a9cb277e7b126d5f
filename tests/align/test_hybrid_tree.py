"""``prepare lang --tree RUNG``: the network trains on the aligner's likelihood tree (Kaldi's
nnet recipes train on the GMM's tree): the lang's pdfs are the rung's, for every context;
the targets follow the aligner's states; a rung that does not fit is one error line."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

from asrtrain.align.saved import load_rung
from asrtrain.lang.pdf_ali import read_alignments
from asrtrain.lang.tree import ContextTree


def test_the_lang_takes_the_sat_rungs_tree(one_process: Path, tiny_corpus: Path, tmp_path: Path,
                                           run_cli) -> None:
    rung = load_rung(one_process / "models" / "sat.pt")   # (too small a ladder to split a root)
    lang = tmp_path / "lang"
    proc = run_cli("prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", one_process,
                   lang, "--order", "2", "--tree", one_process / "models" / "sat.pt")
    assert proc.returncode == 0, proc.stderr[-3000:]
    tree = ContextTree.from_json(json.loads((lang / "tree").read_text()))
    assert tree.num_pdfs == rung.tree.num_pdfs == int((lang / "num_pdfs").read_text())
    phones = sorted(tree.topo.num_states)
    for left, c, right in itertools.product([0, *phones], phones, [0, *phones]):
        for s in range(tree.topo.num_states[c]):
            assert tree.pdf(left, c, right, s) == rung.tree.pdf(left, c, right, s)
    states = dict(read_alignments(one_process / "train" / "state.scp"))
    for utt, frames in read_alignments(lang / "pdf_ali" / "train.scp"):
        assert [tree.pdf_info[p][1] for p in frames] == states[utt].tolist()
    assert (lang / "graph" / "HCLG.fst").exists()


def test_a_rung_of_other_phones_is_one_error_line(one_process: Path, tiny_corpus: Path,
                                                  tmp_path: Path, run_cli, one_error) -> None:
    import torch

    state = torch.load(one_process / "models" / "sat.pt", weights_only=False)
    a, b = sorted(state["phones"])[1:3]   # two phones' numbers swapped: another phones.txt
    state["phones"][a], state["phones"][b] = state["phones"][b], state["phones"][a]
    other = tmp_path / "other.pt"
    torch.save(state, other)
    lang = tmp_path / "lang"
    proc = run_cli("prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", one_process,
                   lang, "--order", "2", "--tree", other)
    one_error(proc.stderr, 1, proc.returncode, str(other), "--tree", "numbered otherwise")
    assert not (lang / "graph" / "HCLG.fst").exists()


def test_prepare_tree_grows_the_networks_own_tree_on_the_last_rung(
        one_process: Path, tiny_corpus: Path, tmp_path: Path, run_cli) -> None:
    """More leaves than the rung's, each with the frames the questions demand on the very
    alignments the aligner wrote (the realignment reproduces them), and a lang that reads it."""
    from asrtrain.lang.questions import MIN_LEAF_FRAMES

    rung = load_rung(one_process / "models" / "sat.pt")
    out = tmp_path / "trees" / "network.pt"
    asked = 3 * rung.tree.num_pdfs
    proc = run_cli("prepare", "tree", one_process, out, "--leaves", asked)
    assert proc.returncode == 0, proc.stderr[-3000:]
    grown = load_rung(out)
    assert rung.tree.num_pdfs < grown.tree.num_pdfs <= asked
    assert grown.tree.topo == rung.tree.topo   # the rung's HMM: the graph decodes with it
    lang = tmp_path / "lang"
    proc = run_cli("prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", one_process,
                   lang, "--order", "2", "--tree", out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert int((lang / "num_pdfs").read_text()) == grown.tree.num_pdfs
    frames = [0] * grown.tree.num_pdfs
    for _, ali in read_alignments(lang / "pdf_ali" / "train.scp"):
        for p in ali:
            frames[p] += 1
    split = Counter(grown.tree.pdf_info)   # a phone state with 2+ pdfs was split
    leaves = [f for f, key in zip(frames, grown.tree.pdf_info, strict=True) if split[key] > 1]
    assert leaves and min(leaves) >= MIN_LEAF_FRAMES, sorted(leaves)[:5]


def test_prepare_tree_needs_a_context_dependent_rung(one_process: Path, tmp_path: Path,
                                                     run_cli, one_error) -> None:
    import shutil

    ali = tmp_path / "ali"
    shutil.copytree(one_process, ali)
    record = ali / "prepare-align.config.yaml"
    text = record.read_text()
    record.write_text(text.replace(f"stages: {_stages(text)}", "stages: mono"))
    proc = run_cli("prepare", "tree", ali, tmp_path / "network.pt", "--leaves", 50)
    one_error(proc.stderr, 1, proc.returncode, str(record), "context-dependent")
    assert not (tmp_path / "network.pt").exists()


def _stages(record: str) -> str:
    return next(ln.split(":", 1)[1].strip() for ln in record.splitlines()
                if ln.startswith("stages:"))
