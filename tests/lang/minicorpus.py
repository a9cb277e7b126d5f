"""A hand-made miniature corpus in the synth layout (contract 1), for lang and decode tests.

Six words with a homophone pair (READ/REED) and a prefix pair (A/AT); phone alignments
are made from the lexicon with seeded random durations (1-7 frames, so short phones that
leave their HMM early occur) and optional silence between words.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

PHONES = ["sil", "a", "t", "r", "i", "d", "k", "ae", "s", "o", "g"]
LEXICON = {
    "A": [["a"]], "AT": [["a", "t"]], "READ": [["r", "i", "d"]], "REED": [["r", "i", "d"]],
    "CAT": [["k", "ae", "t"]], "CATS": [["k", "ae", "t", "s"]], "DOG": [["d", "o", "g"], ["d", "a", "g"]],
    "GOOD": [["g", "o", "d"]],
}
SENTENCES = [
    "A CAT", "A DOG", "THE CAT", "A GOOD DOG", "READ A CAT", "CATS READ", "A DOG AT A CAT",
    "GOOD CATS", "A GOOD CAT", "REED AT A DOG", "DOG READ", "A CAT READ A DOG", "CATS AT A DOG",
    "GOOD DOG", "A DOG READ", "A CAT AT A DOG",
]
DEV = ["A GOOD DOG READ", "CATS AT A CAT", "A DOG", "REED A CAT", "GOOD CATS READ"]


def phone_ids() -> dict[str, int]:
    return {p: i for i, p in enumerate(PHONES, start=1)}


def _alignment(words: list[str], rng: random.Random) -> np.ndarray:
    ids = phone_ids()
    frames = [ids["sil"]] * rng.randint(3, 6)
    for k, w in enumerate(words):
        pron = rng.choice(LEXICON[w])
        for p in pron:
            frames += [ids[p]] * rng.choice([1, 2, 3, 4, 5, 6, 7])
        if k + 1 < len(words) and rng.random() < 0.3:
            frames += [ids["sil"]] * rng.randint(3, 8)
    frames += [ids["sil"]] * rng.randint(3, 6)
    return np.array(frames, dtype=np.int32)


def write_corpus(root: Path, seed: int = 0, train_copies: int = 6) -> Path:
    """Write dict/, lm_text, phones.txt and {train,dev,test}/{text,ali.scp,ali.ark}."""
    import kaldiio

    rng = random.Random(seed)
    d = root / "dict"
    d.mkdir(parents=True)
    (d / "lexicon.txt").write_text("".join(f"{w} {' '.join(p)}\n" for w, ps in LEXICON.items() for p in ps))
    (d / "silence_phones.txt").write_text("sil\n")
    (d / "optional_silence.txt").write_text("sil\n")
    (d / "nonsilence_phones.txt").write_text("".join(f"{p}\n" for p in PHONES[1:]))
    (root / "phones.txt").write_text("<eps> 0\n" + "".join(f"{p} {i}\n" for p, i in phone_ids().items()))
    (root / "lm_text").write_text("".join(s + "\n" for s in SENTENCES))
    train = [s for s in SENTENCES if "THE" not in s.split()]
    for split, sents in (("train", train * train_copies), ("dev", DEV), ("test", DEV[:2])):
        sd = root / split
        sd.mkdir()
        utts = [(f"spk-0001-{i:06d}", s.split()) for i, s in enumerate(sents)]
        (sd / "text").write_text("".join(f"{u} {' '.join(ws)}\n" for u, ws in utts))
        with kaldiio.WriteHelper(f"ark,scp:{sd / 'ali.ark'},{sd / 'ali.scp'}") as wr:
            for u, ws in utts:
                wr(u, _alignment(ws, rng))
    return root
