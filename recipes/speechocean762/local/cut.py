#!/usr/bin/env python3
"""A small corpus cut from speechocean762's data dirs, the size of a user's first real corpus.

The real-speech issue's read-speech corpus (74 training speakers, 0.66 h; 10 test speakers,
130 utterances) is the yardstick for "40 minutes of speech from WAVs to WER in 15 minutes";
this cut has its shape, so the time and the WER can be measured here and rerun later:

    local/cut.py data sos        # after local/data.sh CORPUS data
    recipes/custom/run.sh --train sos/train --test sos/test --dict sos/dict --lm-text sos/lm_text

Speakers and utterances are drawn at random (seeded, the same on every machine); the LM text
is the cut's training transcripts only. Standard library only: it runs before the venv exists.
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
from pathlib import Path


def read_map(path: Path) -> dict[str, str]:
    """A Kaldi table `key rest-of-line` as a dict, in file order."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, _, rest = line.partition(" ")
        if key:
            out[key] = rest
    return out


def choose(src: Path, speakers: int, per_speaker: int, seed: int) -> list[str]:
    """`speakers` speakers at random, `per_speaker` of each one's utterances at random."""
    spk2utt = {s: u.split() for s, u in read_map(src / "spk2utt").items()}
    eligible = sorted(s for s, utts in spk2utt.items() if len(utts) >= per_speaker)
    if len(eligible) < speakers:
        sys.exit(f"{src}/spk2utt: {len(eligible)} speakers have {per_speaker} utterances, "
                 f"{speakers} asked")
    rng = random.Random(seed)
    utts: list[str] = []
    for spk in sorted(rng.sample(eligible, speakers)):
        utts += rng.sample(sorted(spk2utt[spk]), per_speaker)
    return sorted(utts)


def write_subset(src: Path, dst: Path, utts: list[str]) -> None:
    """The data dir `src` restricted to `utts` (wav.scp, text, utt2spk, spk2utt)."""
    dst.mkdir(parents=True, exist_ok=True)
    keep = set(utts)
    for name in ("wav.scp", "text", "utt2spk"):
        table = read_map(src / name)
        missing = keep - table.keys()
        if missing:
            sys.exit(f"{src}/{name}: {len(missing)} chosen utterances missing")
        (dst / name).write_text("".join(f"{u} {table[u]}\n" for u in utts))
    utt2spk = read_map(dst / "utt2spk")
    spk2utt: dict[str, list[str]] = {}
    for utt in utts:
        spk2utt.setdefault(utt2spk[utt], []).append(utt)
    (dst / "spk2utt").write_text("".join(f"{s} {' '.join(u)}\n" for s, u in sorted(spk2utt.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="local/data.sh's output (train_all, test, dict)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--train-speakers", type=int, default=74)
    parser.add_argument("--train-per-speaker", type=int, default=8)
    parser.add_argument("--test-speakers", type=int, default=10)
    parser.add_argument("--test-per-speaker", type=int, default=13)
    args = parser.parse_args()
    train = choose(args.data / "train_all", args.train_speakers, args.train_per_speaker, seed=1)
    test = choose(args.data / "test", args.test_speakers, args.test_per_speaker, seed=2)
    write_subset(args.data / "train_all", args.out / "train", train)
    write_subset(args.data / "test", args.out / "test", test)
    text = read_map(args.out / "train" / "text")
    (args.out / "lm_text").write_text("".join(f"{t}\n" for t in text.values()))
    shutil.copytree(args.data / "dict", args.out / "dict", dirs_exist_ok=True)
    words = sum(len(t.split()) for t in read_map(args.out / "test" / "text").values())
    print(f"{args.out}: train {len(train)} utterances of {args.train_speakers} speakers, "
          f"test {len(test)} utterances ({words} words) of {args.test_speakers} speakers")


if __name__ == "__main__":
    main()
