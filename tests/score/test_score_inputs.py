"""Readers, CTM grouping, normalisation and the policy for mismatched inputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrtrain.core.errors import InputError
from asrtrain.score import formats
from asrtrain.score.align import Net, Word, align, count
from asrtrain.score.normalize import Normalizer
from asrtrain.score.scorer import load_inputs, score_inputs


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_extra_hypothesis_is_an_error_naming_it(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "s1_1 A B\n")
    hyp = _write(tmp_path / "hyp.txt", "s1_1 A B\ns9_9 X Y Z\n")
    inputs = load_inputs(ref, hyp)
    with pytest.raises(InputError, match=r"hyp.txt: hypothesis for 's9_9' which the "
                                         r"reference lacks"):
        score_inputs(inputs, Normalizer(), "error", hyp)


def test_extra_hypothesis_ignored_is_counted(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "s1_1 A B\n")
    hyp = _write(tmp_path / "hyp.txt", "s1_1 A B\ns9_9 X Y Z\ns9_8 Q\n")
    res = score_inputs(load_inputs(ref, hyp), Normalizer(), "ignore", hyp)
    assert res.extra_hyp == {"s9_8": 1, "s9_9": 3}
    assert res.total().err == 0 and res.total().words == 2


def test_reference_without_hypothesis_is_all_deletions_and_counted(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "s1_1 A B\ns1_2 C D E\ns2_1\n")
    hyp = _write(tmp_path / "hyp.txt", "s1_1 A B\n")
    res = score_inputs(load_inputs(ref, hyp), Normalizer())
    assert res.missing_hyp == ["s1_2", "s2_1"]
    t = res.total()
    assert (t.sent, t.words, t.cor, t.dele, t.sent_err) == (3, 5, 2, 3, 1)
    assert res.kaldi_total().dele == 3


def test_malformed_ctm_line_names_file_and_line(tmp_path: Path) -> None:
    ctm = _write(tmp_path / "h.ctm", "u1 1 0.00 0.30 A\nu1 1 0.40 B\n")
    with pytest.raises(InputError, match=r"h.ctm: line 2: a CTM line needs"):
        formats.read_ctm(ctm)
    ctm = _write(tmp_path / "h2.ctm", "u1 1 0.00 0.30 A\n\nu1 1 0.4x 0.2 B\n")
    with pytest.raises(InputError, match=r"h2.ctm: line 3: begin time '0.4x' is not a number"):
        formats.read_ctm(ctm)
    ctm = _write(tmp_path / "h3.ctm", "u1 1 0.00 -0.30 A\n")
    with pytest.raises(InputError, match=r"line 1: negative duration"):
        formats.read_ctm(ctm)


def test_malformed_stm_and_text(tmp_path: Path) -> None:
    stm = _write(tmp_path / "r.stm", ";; c\nf A s 0.0 1.0 a b\nf A s 2.0\n")
    with pytest.raises(InputError, match=r"r.stm: line 3: an STM line needs"):
        formats.read_stm(stm)
    stm = _write(tmp_path / "r2.stm", "f A s 3.0 1.0 a\n")
    with pytest.raises(InputError, match=r"line 1: segment ends"):
        formats.read_stm(stm)
    text = _write(tmp_path / "text", "u1 A\nu2 B\nu1 C\n")
    with pytest.raises(InputError, match=r"text: line 3: utterance 'u1' repeats line 1"):
        formats.read_text(text)
    hyp = _write(tmp_path / "h.txt", "u1 A\n")
    with pytest.raises(InputError, match=r"STM reference needs a CTM hypothesis"):
        load_inputs(tmp_path / "r.stm", hyp, "stm", "text")


def test_ctm_grouped_by_stm_as_sclite() -> None:
    segs = [formats.Utterance("s1", "a", ["x"], "f", "A", 1.0, 2.0),
            formats.Utterance("s2", "a", ["x"], "f", "A", 2.0, 4.0),
            formats.Utterance("s3", "a", [], "f", "A", 5.0, 6.0, ignore=True),
            formats.Utterance("s4", "a", ["x"], "f", "A", 7.0, 8.0)]
    words = [formats.CtmWord("f", "A", b, d, w, i) for i, (b, d, w) in enumerate([
        (0.1, 0.2, "before"),      # before the first segment: goes to it
        (1.8, 0.4, "edge"),        # midpoint 2.0 == end of s1: goes to s2
        (4.2, 0.3, "gap"),         # between s2 and the IGNORE segment: into it, dropped
        (5.5, 0.2, "ign"),         # inside the IGNORE segment: dropped
        (6.9, 0.2, "g"),
        (9.0, 0.2, "after"),       # after the last segment: goes to it
    ])]
    g = formats.group_ctm_by_stm(words, segs)
    assert g.hyps == {"s1": ["before"], "s2": ["edge"], "s4": ["g", "after"]}
    assert g.ignored_words == 2


def test_stm_ctm_pipeline_counts(tmp_path: Path) -> None:
    stm = _write(tmp_path / "ref.stm", "f1 A spk1 0.00 2.00 <o,f0,male> a b c\n"
                                        "f1 A spk1 2.00 4.00 d e\n"
                                        "f1 A spk1 5.00 6.00 IGNORE_TIME_SEGMENT_IN_SCORING\n"
                                        "f1 A spk1 7.00 8.00 g h\n"
                                        "f1 B spk2 0.00 3.00 x y\n")
    ctm = _write(tmp_path / "hyp.ctm", "f1 A 0.10 0.30 a 0.9\nf1 A 0.50 0.30 b\n"
                                        "f1 A 1.80 0.40 c\nf1 A 2.50 0.20 d\n"
                                        "f1 A 4.20 0.30 q\nf1 A 5.20 0.30 r\n"
                                        "f1 A 6.90 0.20 g\nf1 A 7.95 0.20 h\n"
                                        "f1 A 9.00 0.20 k\nf1 B 1.00 0.50 x\n")
    res = score_inputs(load_inputs(stm, ctm), Normalizer())
    # the counts sclite reports on these files (sum: 4 sentences, 9 words, 6 corr,
    # 0 sub, 3 del, 2 ins; spk1 5 0 2 2, spk2 1 0 1 0)
    spk = res.by_speaker()
    assert (spk["spk1"].cor, spk["spk1"].sub, spk["spk1"].dele, spk["spk1"].ins) == (5, 0, 2, 2)
    assert (spk["spk2"].cor, spk["spk2"].sub, spk["spk2"].dele, spk["spk2"].ins) == (1, 0, 1, 0)
    assert res.ignored_words == 2
    assert [u.utt.id for u in res.utts][0] == "f1-A_000000-000200"


def test_text_ctm_grouped_by_utterance(tmp_path: Path) -> None:
    ref = _write(tmp_path / "ref.txt", "spk-0001-000001 THE CAT\nspk-0001-000002 A DOG\n")
    ctm = _write(tmp_path / "hyp.ctm", "spk-0001-000001 1 0.50 0.2 CAT\n"
                                        "spk-0001-000001 1 0.10 0.2 THE\n"
                                        "spk-0001-000002 1 0.10 0.2 A\n")
    res = score_inputs(load_inputs(ref, ctm), Normalizer())
    assert res.hyp_format == "ctm"
    assert [(u.utt.speaker, u.counts.cor, u.counts.dele) for u in res.utts] == \
        [("spk-0001", 2, 0), ("spk-0001", 1, 1)]


def test_speakers_from_utt2spk_beside_reference(tmp_path: Path) -> None:
    ref = _write(tmp_path / "text", "u1 A\nu2 B\n")
    _write(tmp_path / "utt2spk", "u1 alice\nu2 bob\n")
    hyp = _write(tmp_path / "hyp.txt", "u1 A\nu2 B\n")
    res = score_inputs(load_inputs(ref, hyp), Normalizer())
    assert sorted(res.by_speaker()) == ["alice", "bob"]


def test_speaker_of_ids() -> None:
    assert formats.speaker_of("sw_4390-A_015445-015911") == "sw_4390-A"
    assert formats.speaker_of("spk-0007-000123") == "spk-0007"
    assert formats.speaker_of("plain") == "plain"


def test_sniff_formats(tmp_path: Path) -> None:
    assert formats.sniff_format(_write(tmp_path / "a", "u1 1 0.0 0.3 A\n")) == "ctm"
    assert formats.sniff_format(_write(tmp_path / "b", "f A s 0.0 1.0 x y z\n")) == "stm"
    assert formats.sniff_format(_write(tmp_path / "c", "u1 A B C\n")) == "text"
    assert formats.sniff_format(_write(tmp_path / "d.stm", "anything\n")) == "stm"


def test_noise_filtered_counted_and_case_folded() -> None:
    n = Normalizer()
    ref = n.network(["the", "[noise]", "Cat", "<unk>"], ("trn", "ref"))
    hyp = n.network(["THE", "cat", "[laughter]"], ("trn", "hyp"))
    c = count(align(ref, hyp))
    assert (c.words, c.cor, c.err) == (2, 2, 0)
    assert n.filtered == {"[NOISE]": 1, "<UNK>": 1, "[LAUGHTER]": 1}


def _counts(n: Normalizer, ref: str, hyp: str) -> tuple[int, int, int, int]:
    c = count(align(n.network(ref.split(), ("trn", "ref")),
                    n.network(hyp.split(), ("trn", "hyp"))))
    return c.cor, c.sub, c.dele, c.ins


def test_optional_deletion_and_fragments_change_counts_as_sclite() -> None:
    """Counts sclite gives on these pairs (see the pra of sclite -D / -F in the report)."""
    plain = Normalizer(optional_deletable=False)
    d = Normalizer(optional_deletable=True)
    f = Normalizer(optional_deletable=False, fragments="correct")
    assert _counts(plain, "a (uh) b", "a b") == (2, 0, 1, 0)
    assert _counts(d, "a (uh) b", "a b") == (3, 0, 0, 0)
    assert _counts(d, "a (uh) b", "a uh b") == (3, 0, 0, 0)
    assert _counts(d, "a (uh) b", "a um b") == (2, 1, 0, 0)
    assert _counts(plain, "a ab- c", "a abc c") == (2, 1, 0, 0)
    assert _counts(f, "a ab- c", "a abc c") == (3, 0, 0, 0)
    assert _counts(f, "a -bc d", "a abc d") == (3, 0, 0, 0)
    assert _counts(f, "a ab- c", "a c") == (2, 0, 1, 0)      # deleting a fragment still costs
    assert _counts(f, "x ab-", "x a") == (1, 1, 0, 0)        # the word must extend the prefix


def test_alternations_align_to_best_path() -> None:
    n = Normalizer()
    assert _counts(n, "a { b / c d / @ } e", "a c d e") == (4, 0, 0, 0)
    assert _counts(n, "a { b / c d / @ } e", "a e") == (2, 0, 0, 0)
    assert _counts(n, "a { b / c d / @ } e", "a b e") == (3, 0, 0, 0)
    with pytest.raises(InputError, match="unclosed"):
        n.network("a { b / c".split(), ("trn", "ref"), "u1")


def test_empty_reference_and_hypothesis() -> None:
    empty = Net.from_words([])
    assert count(align(empty, empty)).words == 0
    c = count(align(empty, Net.from_words([Word("A"), Word("B")])))
    assert (c.words, c.ins, c.sent_err) == (0, 2, 1)
    c = count(align(Net.from_words([Word("A")]), empty))
    assert (c.words, c.dele) == (1, 1)


def test_reference_utterances_missing_from_utt2spk_are_counted(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    ref = _write(tmp_path / "ref.txt", "a_1 YES NO\nb_1 YES\n")
    with caplog.at_level("WARNING", logger="asrtrain.score"):
        refs = formats.read_text(ref, {"a_1": "alice"})
    assert [u.speaker for u in refs] == ["alice", formats.speaker_of("b_1")]
    assert "1 utterance(s) missing from utt2spk" in caplog.text and "b_1" in caplog.text
