#!/usr/bin/env python3
"""Test WER by speaker age group (children to 12, teenagers, adults), each decode at its
dev-picked setting: a diagnosis of where a system's errors are, not a figure to tune on.

speechocean762's data dirs carry ``spk2age``; the decode dirs are ``asrtrain decode`` outputs
scored with ``asrtrain score --sweep … --pick-on …`` (``score/dev_picked.json`` names the setting;
the texts are read and the errors counted as ``asrtrain score`` does):

    local/wer_by_age.py data/test corpus/test/spk2age sat=exp/gmm/decode_sat_test \\
        blstm=exp/blstm_single/decode_test
"""
from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from asrtrain.data.kaldi_dir import read_table, read_utt2spk
from asrtrain.score.align import kaldi_counts
from asrtrain.score.formats import read_text

GROUPS = ((12, "children (to 12)"), (17, "teenagers (13-17)"), (200, "adults (18+)"))


def group(age: int) -> str:
    return next(name for top, name in GROUPS if age <= top)


def picked_hyps(decode: Path) -> dict[str, list[str]]:
    """The hypotheses of the setting ``asrtrain score --pick-on`` picked on dev."""
    name = json.loads((decode / "score" / "dev_picked.json").read_text())["picked"]["name"]
    return {u.id: u.words for u in read_text(decode / "hyp" / f"{name}.txt")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", type=Path, help="the test data dir (text, utt2spk)")
    ap.add_argument("spk2age", type=Path)
    ap.add_argument("decodes", nargs="+", help="NAME=DECODE_DIR")
    args = ap.parse_args()
    refs = {u.id: u.words for u in read_text(args.data / "text")}
    spk = read_utt2spk(args.data / "utt2spk")
    age = {s: int(a) for s, a in read_table(args.spk2age).items()}
    speakers = defaultdict(set)
    for s in spk.values():
        speakers[group(age[s])].add(s)
    print("speakers: " + ", ".join(f"{g} {len(speakers[g])}" for _, g in GROUPS))
    for item in args.decodes:
        name, _, decode = item.partition("=")
        hyps = picked_hyps(Path(decode))
        errors: dict[str, int] = defaultdict(int)
        words: dict[str, int] = defaultdict(int)
        for utt, ref in refs.items():
            g = group(age[spk[utt]])
            errors[g] += kaldi_counts(ref, hyps.get(utt, [])).err  # a missing hyp: all deleted
            words[g] += len(ref)
        cells = [f"{g} {100 * errors[g] / words[g]:.2f}% ({words[g]} words)" for _, g in GROUPS if words[g]]
        print(f"{name}: " + "; ".join(cells) + f"; all {100 * sum(errors.values()) / sum(words.values()):.2f}%")


if __name__ == "__main__":
    main()
