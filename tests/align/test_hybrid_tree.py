"""``prepare lang --tree RUNG``: the network trains on the aligner's likelihood tree (Kaldi's
nnet recipes train on the GMM's tree): the lang's pdfs are the rung's, for every context;
the targets follow the aligner's states; a rung that does not fit is one error line."""

from __future__ import annotations

import itertools
import json
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
