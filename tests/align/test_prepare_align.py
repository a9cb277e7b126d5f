"""``asrtrain prepare align`` on synthesized speech: alignments from nothing, the
contract ``prepare lang`` reads, and how close they come to the exact ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asrtrain.lang.lexicon import read_dict_dir, read_symbols
from asrtrain.lang.pdf_ali import read_alignments

SMALL = ["--mono-gauss", "150", "--mono-iters", "12", "--leaves", "80", "--gauss", "300",
         "--iters", "6"]


def readings(words: list[str], prons: dict[str, list[tuple[str, ...]]]) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = {()}
    for w in words:
        out = {r + p for r in out for p in prons[w]}
    return out


def test_alignments_from_nothing_follow_the_transcripts_and_feed_prepare_lang(
        tiny_corpus: Path, tiny_mfcc: Path, tmp_path: Path, run_cli) -> None:
    out = tmp_path / "ali"
    # a minute of speech is too little to align every utterance well: the contract is
    # what is checked here (test_alignment_quality_on_six_minutes_of_speech measures quality)
    proc = run_cli("prepare", "align", tiny_corpus / "dict", tiny_mfcc / "train", out,
                   "--split", f"test={tiny_mfcc / 'test'}", "--stages", "mono,tri",
                   "--phones", tiny_corpus / "phones.txt", "--reference", tiny_corpus, *SMALL,
                   "--retry-beam", "400", "--last-beam", "4000", "--max-lost", "1",
                   timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert read_symbols(out / "phones.txt") == read_symbols(tiny_corpus / "phones.txt")
    lex = read_dict_dir(tiny_corpus / "dict", tiny_corpus / "phones.txt")
    prons: dict[str, list[tuple[str, ...]]] = {}
    for w, p in lex.prons:
        prons.setdefault(w, []).append(p)
    names = {i: p for p, i in lex.phones.items()}
    for split in ("train", "test"):
        text = {ln.split()[0]: ln.split()[1:] for ln in
                (tiny_corpus / split / "text").read_text().splitlines()}
        frames = dict(read_alignments(out / split / "ali.scp"))
        failed = {ln.split()[0] for ln in (out / split / "failed.txt").read_text().splitlines()}
        assert set(frames) | failed == set(text) and not set(frames) & failed
        ctm: dict[str, list[str]] = {}
        for line in (out / split / "phone.ctm").read_text().splitlines():
            utt, _, _, _, phone = line.split()
            ctm.setdefault(utt, []).append(phone)
        for utt, phones in ctm.items():
            spoken = tuple(p for p in phones if p != lex.silence)
            assert spoken in readings(text[utt], prons), utt
            counts = [names[int(i)] for i in frames[utt]]
            assert set(counts) == set(phones)
    report = json.loads((out / "report.json").read_text())
    assert set(report["stages"]) == {"mono", "tri"}
    assert 0.0 < report["stages"]["tri"]["agreement"]["within_20ms"] <= 1.0

    from asrtrain.lang.prepare import prepare_lang

    figures = prepare_lang(tiny_corpus / "dict", tiny_corpus / "lm_text", out, tmp_path / "lang",
                           order=2, num_pdfs=60)
    assert figures["num_pdfs"] >= 60
    pdf = dict(read_alignments(tmp_path / "lang" / "pdf_ali" / "train.scp"))
    train = dict(read_alignments(out / "train" / "ali.scp"))
    assert {u: len(v) for u, v in pdf.items()} == {u: len(v) for u, v in train.items()}
    # the targets follow the aligner's HMM states: each pdf names the state of its frame
    assert figures["targets"] == "states"
    tree = json.loads((tmp_path / "lang" / "tree").read_text())
    info = tree["pdf_info"]
    states = dict(read_alignments(out / "train" / "state.scp"))
    for utt, frames in pdf.items():
        assert [info[p][1] for p in frames] == states[utt].tolist()


@pytest.mark.slow
def test_alignment_quality_on_six_minutes_of_speech(small_corpus: Path, tmp_path: Path,
                                                   run_cli) -> None:
    """The whole ladder on 6 training speakers: every training utterance aligned, and
    most boundaries within 20 ms of the synthesizer's exact ones."""
    from asrtrain.data.features import FeatureConfig, make_features

    make_features(small_corpus / "train", tmp_path / "mfcc", FeatureConfig(type="mfcc"), nj=2)
    out = tmp_path / "ali"
    proc = run_cli("prepare", "align", small_corpus / "dict", tmp_path / "mfcc", out,
                   "--phones", small_corpus / "phones.txt", "--reference", small_corpus,
                   "--mono-gauss", "300", "--leaves", "150", "--gauss", "600", "--iters", "8",
                   timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["splits"]["train"]["lost"] == {}
    for stage in ("mono", "tri", "lda", "sat"):
        assert report["stages"][stage]["agreement"]["within_20ms"] > 0.7, report["stages"]
    # the SAT model's fMLLR features for the network, every utterance of the split
    import kaldiio

    feats = dict(kaldiio.load_scp_sequential(str(out / "fmllr" / "train" / "feats.scp")))
    assert report["sat_fmllr"]["train"] == len(feats) == report["splits"]["train"]["aligned"]
    assert {m.shape[1] for m in feats.values()} == {40}


def test_monophones_on_the_shortest_utterances_then_all_aligned(tiny_corpus: Path,
                                                               tiny_mfcc: Path, tmp_path: Path,
                                                               run_cli) -> None:
    """``--mono-utts N``: Kaldi's flat start on the N shortest utterances of a large corpus;
    the next rung still gets every utterance aligned."""
    out = tmp_path / "ali"
    proc = run_cli("prepare", "align", tiny_corpus / "dict", tiny_mfcc / "train", out,
                   "--stages", "mono,tri", "--mono-utts", "5", "--mono-iters", "4",
                   "--mono-gauss", "100", "--leaves", "60", "--gauss", "150", "--iters", "2",
                   "--retry-beam", "400", "--last-beam", "4000", "--max-lost", "1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    n_utts = len((tiny_mfcc / "train" / "text").read_text().splitlines())
    assert f"trained on the 5 shortest of {n_utts} utterances" in proc.stderr
    aligned = dict(read_alignments(out / "train" / "ali.scp"))
    failed = (out / "train" / "failed.txt").read_text().splitlines()
    assert len(aligned) + len(failed) == n_utts and len(aligned) > 5
