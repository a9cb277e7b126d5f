"""``prepare realign``: the training transcripts aligned by the trained network (Kaldi's
nnet3/align.sh). A network fitted to the ladder's targets, on frames that say their pdf,
must give back the ladder's alignments; the output is an alignment dir that ``prepare lang``
reads; a model of another tree or a split the ladder never aligned is one error line."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from asrtrain.lang.pdf_ali import read_alignments

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def fitted(gmm_lang: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(final.pt, train archive, dev archive) of a BLSTM fitted to gmm_lang's targets."""
    spec = importlib.util.spec_from_file_location("decode_conftest",
                                                  ROOT / "tests" / "decode" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    work = tmp_path_factory.mktemp("fitted")
    final, dev, loss = mod.fit_model(gmm_lang, work, dev_targets=True)
    assert loss < 0.5, loss
    return final, work / "train.h5", dev


def test_the_network_gives_back_the_alignments_its_frames_say(
        fitted: tuple[Path, Path, Path], gmm_lang: Path, one_process: Path, tiny_corpus: Path,
        tmp_path: Path, run_cli) -> None:
    final, train, dev = fitted
    out = tmp_path / "ali_nnet"
    proc = run_cli("prepare", "realign", final, gmm_lang, one_process, out,
                   "--archive", f"train={train}", "--archive", f"dev={dev}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "aligned by the network" in proc.stdout
    for split in ("train", "dev"):
        targets = dict(read_alignments(gmm_lang / "pdf_ali" / f"{split}.scp"))
        ladder = dict(read_alignments(one_process / split / "ali.scp"))
        pdfs = dict(read_alignments(out / split / "pdf.scp"))
        phones = dict(read_alignments(out / split / "ali.scp"))
        assert set(pdfs) == set(targets) == set(phones)
        same = sum(int((pdfs[u] == targets[u]).sum()) for u in pdfs)
        total = sum(len(t) for t in targets.values())
        assert same >= 0.95 * total, (split, same, total)
        assert all(np.array_equal(np.unique(phones[u]), np.unique(ladder[u])) for u in phones)
    lang = tmp_path / "lang"
    proc = run_cli("prepare", "lang", tiny_corpus / "dict", tiny_corpus / "lm_text", out, lang,
                   "--order", "2", "--num-pdfs", "100")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (lang / "pdf_ali" / "train.scp").exists()


def test_a_model_of_another_tree_is_one_error_line(
        fitted: tuple[Path, Path, Path], gmm_lang: Path, one_process: Path, tmp_path: Path,
        run_cli, one_error) -> None:
    """The same outputs, trained for another tree (its pdfs would mean other HMM states)."""
    import torch

    final, train, _ = fitted
    payload = torch.load(final, weights_only=True)
    payload["meta"]["tree_id"] = "0123456789abcdef"
    other = tmp_path / "other.pt"
    torch.save(payload, other)
    out = tmp_path / "ali_nnet"
    proc = run_cli("prepare", "realign", other, gmm_lang, one_process, out,
                   "--archive", f"train={train}")
    one_error(proc.stderr, 1, proc.returncode, str(other), "0123456789abcdef")
    assert not (out / "train" / "ali.scp").exists()


def test_a_split_the_ladder_did_not_align_is_one_error_line(
        fitted: tuple[Path, Path, Path], gmm_lang: Path, one_process: Path, tmp_path: Path,
        run_cli, one_error) -> None:
    final, train, _ = fitted
    proc = run_cli("prepare", "realign", final, gmm_lang, one_process, tmp_path / "out",
                   "--archive", f"eval={train}")
    line = one_error(proc.stderr, 1, proc.returncode, "'eval'", "train, dev, test")
    assert "prepare-align.config.yaml" in line          # it names the record it read
    assert not (tmp_path / "out" / "eval").exists()     # nothing written for it


def test_alignments_written_in_parts_are_the_ones_written_whole(
        fitted: tuple[Path, Path, Path], gmm_lang: Path, one_process: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus is written a part at a time (``PART_UTTS`` utterances each); the merged split
    is the same as when every utterance fits in one part."""
    from asrtrain.align import network_align as na

    final, train, _ = fitted
    whole = tmp_path / "whole"
    na.network_align(final, gmm_lang, one_process, {"train": train}, whole)
    monkeypatch.setattr(na, "PART_UTTS", 3)
    parts = tmp_path / "parts"
    figures = na.network_align(final, gmm_lang, one_process, {"train": train}, parts)
    assert figures["train"]["aligned"] > 3 * 2     # several parts
    _same_split(whole / "train", parts / "train")


def test_jobs_in_processes_give_the_alignments_one_process_gives(
        fitted: tuple[Path, Path, Path], gmm_lang: Path, one_process: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--nj 3``: spawned jobs over shares of the archive, their parts merged, give what one
    process gives, and the same figures."""
    from asrtrain.align import network_align as na

    final, train, dev = fitted
    archives = {"train": train, "dev": dev}
    one = na.network_align(final, gmm_lang, one_process, archives, tmp_path / "one")
    monkeypatch.setattr(na, "SPAWN_MIN_FRAMES", 0)     # the tiny corpus in processes of its own
    three = na.network_align(final, gmm_lang, one_process, archives, tmp_path / "three", nj=3)
    assert three == one
    for split in archives:
        _same_split(tmp_path / "one" / split, tmp_path / "three" / split)


def _same_split(a_dir: Path, b_dir: Path) -> None:
    """Two alignment splits hold the same tables (in utterance order), CTM and text, and
    no part files are left in the second."""
    for table in ("ali", "state", "pdf"):
        a = list(read_alignments(a_dir / f"{table}.scp"))
        b = list(read_alignments(b_dir / f"{table}.scp"))
        assert [u for u, _ in a] == [u for u, _ in b] == sorted(u for u, _ in a)
        assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a, b, strict=True))
    for name in ("phone.ctm", "text", "failed.txt"):
        assert (a_dir / name).read_text() == (b_dir / name).read_text(), name
    assert not list(b_dir.glob("*.*.scp")) and not list(b_dir.glob("phone.*.ctm"))
