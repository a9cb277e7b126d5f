"""Pronunciation variants learned from training alignments."""

from __future__ import annotations

from asrtrain.lang.prons import edit_distance, learn_variants, split_words

PRONS = {"A": [("eI",)], "CAT": [("k", "a", "t")], "THERE": [("D", "e@")], "IS": [("I", "z")]}


def test_edit_distance():
    assert edit_distance("kat", "kat") == 0
    assert edit_distance("kat", "kt") == 1
    assert edit_distance(("D", "e@"), ("D", "e@", "r")) == 1


def test_split_finds_in_context_forms():
    words = ["IS", "A", "CAT", "THERE"]
    phones = ["I", "z", "@", "k", "a", "t", "D", "e@", "r"]
    stretches, cost = split_words(words, phones, PRONS)
    assert stretches == [("I", "z"), ("@",), ("k", "a", "t"), ("D", "e@", "r")]
    assert cost == 2
    assert split_words(["DOG"], ["d", "o", "g"], PRONS) is None
    # a linking r fits THERE (D e@ r) or IS (r I z) equally: the earlier word keeps it
    stretches, _ = split_words(["THERE", "IS"], ["D", "e@", "r", "I", "z"], PRONS)
    assert stretches == [("D", "e@", "r"), ("I", "z")]


def test_variants_need_min_count_and_agreeing_transcripts():
    utts = [(["A", "CAT"], ["@", "k", "a", "t"]), (["A", "CAT"], ["@", "k", "a", "t"]),
            (["IS", "THERE"], ["I", "z", "D", "e@", "r"]),
            (["CAT", "CAT"], ["s", "o", "g", "m", "m", "n"])]      # a wrong transcript
    new, stats = learn_variants(utts, PRONS, min_count=2)
    assert new == [("A", ("@",))]
    assert stats["disagree"] == 1 and stats["used"] == 3
    new, _ = learn_variants(utts, PRONS, min_count=1)
    assert new == [("A", ("@",)), ("THERE", ("D", "e@", "r"))]
