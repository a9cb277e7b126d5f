"""A hand-made miniature corpus in the synth layout (contract 1), for lang and decode tests.

Six words with a homophone pair (READ/REED) and a prefix pair (A/AT); phone alignments
are made from the lexicon with seeded random durations (1-7 frames, so short phones that
leave their HMM early occur) and optional silence between words; phone.ctm keeps the
boundary between two equal phones (GOOD DOG: d d) that the frame labels cannot show.
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


def _alignment(words: list[str], rng: random.Random) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    """Frame labels and the phone segments ``(phone, first frame, frames)`` behind them."""
    segs: list[tuple[str, int]] = [("sil", rng.randint(3, 6))]
    for k, w in enumerate(words):
        for p in rng.choice(LEXICON[w]):
            segs.append((p, rng.choice([1, 2, 3, 4, 5, 6, 7])))
        if k + 1 < len(words) and rng.random() < 0.3:
            segs.append(("sil", rng.randint(3, 8)))
    segs.append(("sil", rng.randint(3, 6)))
    ids, frames, out, t = phone_ids(), [], [], 0
    for p, n in segs:
        if out and out[-1][0] == p == "sil":  # silences merge; equal phones do not
            out[-1] = ("sil", out[-1][1], out[-1][2] + n)
        else:
            out.append((p, t, n))
        frames += [ids[p]] * n
        t += n
    return np.array(frames, dtype=np.int32), out


def write_corpus(root: Path, seed: int = 0, train_copies: int = 6) -> Path:
    """Write dict/, lm_text, phones.txt and {train,dev,test}/{text,ali.scp,ali.ark,phone.ctm}."""
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
        ctm = []
        with kaldiio.WriteHelper(f"ark,scp:{sd / 'ali.ark'},{sd / 'ali.scp'}") as wr:
            for u, ws in utts:
                frames, segs = _alignment(ws, rng)
                wr(u, frames)
                # a segment starting at frame f starts between the centres of frames f-1 and f
                ctm += [f"{u} 1 {max(0.0, f * 0.01 + 0.0075):.4f} {n * 0.01:.4f} {p}\n"
                        for p, f, n in segs]
        (sd / "phone.ctm").write_text("".join(ctm))
    return root
