"""Our counts against NIST sclite's on many random reference/hypothesis sets.

Every utterance's (correct, substituted, deleted, inserted) must be identical to
sclite's, which implies identical per-speaker and total counts. The sets have a small
vocabulary (many ties between alignments), empty hypotheses and empty references,
optionally deletable words and fragments, and several speakers.
"""

from __future__ import annotations

import random
from collections import defaultdict
from pathlib import Path

import pytest
from sclite_util import run_sclite_pra

from asrtrain.score.align import Counts, Net, Word, align, count
from asrtrain.score.normalize import Normalizer

VOCAB = ["a", "b", "c", "d", "ab", "abc", "e"]


def _random_pair(rng: random.Random, special: bool) -> tuple[list[str], list[str]]:
    n = rng.choice([0, 0, 1, 2, 3, 5, 8, 12])
    ref = [rng.choice(VOCAB) for _ in range(n)]
    if special:
        for i in range(len(ref)):
            r = rng.random()
            if r < 0.12:
                ref[i] = f"({ref[i]})"
            elif r < 0.2:
                ref[i] = ref[i] + "-"
            elif r < 0.24:
                ref[i] = "-" + ref[i]
    mode = rng.random()
    if mode < 0.1:
        return ref, []
    if mode < 0.2:
        return ref, [rng.choice(VOCAB) for _ in range(rng.randint(0, 6))]
    hyp: list[str] = []
    for w in ref:
        r = rng.random()
        plain = w.strip("()").strip("-") or "a"
        if r < 0.15:
            continue                                   # deletion
        if r < 0.3:
            hyp.append(rng.choice(VOCAB))              # substitution (or match)
        else:
            hyp.append(plain if rng.random() < 0.5 else rng.choice(VOCAB[:3]))
        if rng.random() < 0.15:
            hyp.append(rng.choice(VOCAB))              # insertion
    return ref, hyp


def _make_set(seed: int, n: int, special: bool) -> list[tuple[str, list[str], list[str]]]:
    rng = random.Random(seed)
    speakers = [f"spk{k}" for k in range(6)]
    out = []
    for i in range(n):
        spk = rng.choice(speakers)
        ref, hyp = _random_pair(rng, special)
        out.append((f"{spk}_{i:04d}", ref, hyp))
    return out


def _write_trn(path: Path, items: list[tuple[str, list[str]]]) -> None:
    path.write_text("".join(f"{' '.join(words)} ({utt})\n" for utt, words in items))


@pytest.mark.sclite
@pytest.mark.parametrize("seed,special,flags", [
    (1, False, []),
    (2, True, []),
    (3, True, ["-D"]),
    (4, True, ["-F"]),
    (5, True, ["-D", "-F"]),
])
def test_counts_equal_sclite_per_utterance_and_speaker(tmp_path: Path, sclite: str, seed: int,
                                                       special: bool, flags: list[str]) -> None:
    data = _make_set(seed, 400, special)
    _write_trn(tmp_path / "ref.trn", [(u, r) for u, r, _ in data])
    _write_trn(tmp_path / "hyp.trn", [(u, h) for u, _, h in data])
    theirs = run_sclite_pra(sclite, ["-r", "ref.trn", "trn", "-h", "hyp.trn", "trn",
                                     "-i", "spu_id", *flags], tmp_path)
    norm = Normalizer(fragments="correct" if "-F" in flags else "error",
                      optional_deletable="-D" in flags, filter_regex=None)
    ours: dict[str, Counts] = {}
    for utt, ref, hyp in data:
        ours[utt] = count(align(norm.network(ref, ("trn", "ref")),
                                norm.network(hyp, ("trn", "hyp"))))
    assert len(theirs) == len(data)
    mismatched = [(u, c, (ours[u].cor, ours[u].sub, ours[u].dele, ours[u].ins))
                  for _s, u, c in theirs
                  if c != (ours[u].cor, ours[u].sub, ours[u].dele, ours[u].ins)]
    assert mismatched == []
    per_spk_theirs: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    per_spk_ours: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for spk, utt, c in theirs:
        per_spk_theirs[spk] = [a + b for a, b in zip(per_spk_theirs[spk], c, strict=True)]
        o = ours[utt]
        key = utt.split("_")[0]
        per_spk_ours[key] = [a + b for a, b in zip(per_spk_ours[key],
                                                   (o.cor, o.sub, o.dele, o.ins), strict=True)]
    assert dict(per_spk_theirs) == dict(per_spk_ours)
    assert len(per_spk_ours) == 6
    # the sets do exercise every kind of error
    total = [sum(v[k] for v in per_spk_ours.values()) for k in range(4)]
    assert all(t > 20 for t in total), total


def test_weights_prefer_ins_del_pair_to_two_substitutions() -> None:
    """sclite's weights (sub 4, ins/del 3) split 'a b c' / 'a c d' as del+ins, where a
    unit-cost aligner may report two substitutions: both have 2 errors."""
    pairs = align(Net.from_words([Word(w) for w in "A B C".split()]),
                  Net.from_words([Word(w) for w in "A C D".split()]))
    c = count(pairs)
    assert (c.cor, c.sub, c.dele, c.ins) == (2, 0, 1, 1)
    assert [p.op for p in pairs] == ["C", "D", "C", "I"]


def test_kaldialign_sclite_mode_has_the_same_cost_but_other_ties() -> None:
    """Why align.py has its own DP: kaldialign's ``sclite_mode`` finds alignments of the
    same weighted cost (4 sub + 3 ins/del) but breaks ties differently from sclite, so
    its split into sub/del/ins differs on some sets (ours equals sclite's, above)."""
    import kaldialign

    rng = random.Random(7)
    differ = 0
    for _ in range(300):
        ref, hyp = _random_pair(rng, special=False)
        c = count(align(Net.from_words([Word(w) for w in ref]),
                        Net.from_words([Word(w) for w in hyp])))
        k = kaldialign.edit_distance(ref, hyp, sclite_mode=True)
        assert 4 * c.sub + 3 * (c.dele + c.ins) == 4 * k["sub"] + 3 * (k["del"] + k["ins"])
        differ += (c.sub, c.dele, c.ins) != (k["sub"], k["del"], k["ins"])
    assert differ > 0
