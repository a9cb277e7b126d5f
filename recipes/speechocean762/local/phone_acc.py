#!/usr/bin/env python3
"""Which acoustic model classifies dev's frames better, before any decoder sees them.

The SAT GMM and the BLSTM score different pdf sets (the aligner's tree, the network's), so both
are compared on phones: each model's pdf posteriors are summed per central phone and the
phone with the most mass is the frame's guess, against the aligner's phone of that frame
(exp/ali/dev/ali.scp). The GMM's posterior is its likelihood times the pdf's frequency in
the training alignments, on the SAT features with each dev speaker's transform from the
recipe's first pass; the network's is its output on its own chunks. Prints the phone accuracy
(all frames, speech frames), the phone cross-entropy and the silence confusions of each.

    local/phone_acc.py RUN_DIR [MODEL]     # RUN_DIR: a recipes/custom --data/--exp pair's parent

--ref-ali takes dev's phones from another aligner's split instead (a run on a few speakers has an
aligner as weak as its models; the 2.7 h run's alignments of the same utterances judge both).
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import kaldiio
import numpy as np
import torch

from asrtrain.decode.gmm_scorer import GmmScorer
from asrtrain.decode.loglikes import ModelScorer
from asrtrain.lang.pdf_ali import read_alignments

SILENCE = ("sil", "spn")


def frame_phones(split_dir: Path) -> dict[str, np.ndarray]:
    """utt -> each frame's phone name, from an aligner split's ali.scp (phone ids per frame) and
    the aligner's phones.txt beside the split."""
    names = {int(i): p for p, i in (ln.split() for ln in (split_dir.parent / "phones.txt").read_text().splitlines())}
    table = np.array([names.get(i, "") for i in range(max(names) + 1)], dtype=object)
    return {utt: table[ali] for utt, ali in read_alignments(split_dir / "ali.scp")}


def gmm_pdf_phones(ali: Path) -> tuple[dict[int, str], collections.Counter]:
    """The aligner's pdf -> phone (the commonest under it in train) and its frame counts."""
    phones = frame_phones(ali / "train")
    seen: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    counts: collections.Counter = collections.Counter()
    for utt, pdfs in kaldiio.load_scp_sequential(str(ali / "train/pdf.scp")):
        for pdf, phone in zip(pdfs, phones[utt], strict=True):
            seen[int(pdf)][phone] += 1
            counts[int(pdf)] += 1
    return {p: c.most_common(1)[0][0] for p, c in seen.items()}, counts


def phone_log_posteriors(scores: np.ndarray, pdf_phone: np.ndarray, phones: int) -> np.ndarray:
    """log P(phone | frame) from unnormalised log pdf posteriors."""
    t = torch.from_numpy(scores).double()
    t = t - torch.logsumexp(t, 1, keepdim=True)
    out = torch.full((t.shape[0], phones), -1e30, dtype=torch.double)
    for i in range(phones):
        cols = torch.from_numpy(np.flatnonzero(pdf_phone == i))
        if len(cols):
            out[:, i] = torch.logsumexp(t[:, cols], 1)
    return out.numpy()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="the directory holding data/ and exp/ of a recipes/custom run")
    ap.add_argument("model", type=Path, nargs="?", help="the network [RUN/exp/blstm/final.pt]")
    ap.add_argument("--ref-ali", type=Path, help="dev's reference phones: an aligner split dir "
                    "holding ali.scp, phones.txt beside it [RUN/exp/ali/dev]")
    args = ap.parse_args()
    run, ali = args.run, args.run / "exp/ali"
    gmm_phone, counts = gmm_pdf_phones(ali)
    net_phone = {int(f[0]): f[1] for f in (ln.split() for ln in (run / "data/lang/tree.pdfs.txt").read_text().splitlines())}
    transforms = dict(kaldiio.load_scp(str(run / "exp/gmm/decode_sat_dev/trans.scp")))
    gmm = GmmScorer(ali / "models/sat.pt", run / "data/mfcc/dev", None, transforms=transforms)
    net = ModelScorer(args.model or run / "exp/blstm/final.pt", run / "data/archives/dev.h5", None)
    log_freq = np.full(gmm.num_pdfs, -30.0)
    total = sum(counts.values())
    for pdf, n in counts.items():
        log_freq[pdf] = np.log(n / total)
    phones = sorted(set(gmm_phone.values()) | set(net_phone.values()))
    index = {p: i for i, p in enumerate(phones)}
    silence = [index[p] for p in SILENCE if p in index]
    maps = {"gmm": np.array([index[gmm_phone.get(p, "sil")] for p in range(gmm.num_pdfs)]),
            "net": np.array([index[net_phone[p]] for p in range(len(net_phone))])}
    dev = frame_phones(args.ref_ali or ali / "dev")
    tally: collections.Counter = collections.Counter()
    for utt, frames in net.utterances():
        if utt not in dev:
            tally["utterances without reference"] += 1
            continue
        labels = dev[utt][:frames]
        known = labels != ""
        ref = np.array([index.get(p, -1) for p in labels])
        speech = known & ~np.isin(ref, silence)
        tally["frames"] += int(known.sum())
        tally["speech"] += int(speech.sum())
        scores = {"gmm": gmm(utt)[:frames] + log_freq, "net": net(utt) + net.log_prior.numpy()}
        for name, s in scores.items():
            post = phone_log_posteriors(s, maps[name], len(phones))
            guess = post.argmax(1)
            said_sil = np.isin(guess, silence)
            tally[name + " right"] += int(((guess == ref) & known).sum())
            tally[name + " speech right"] += int(((guess == ref) & speech).sum())
            tally[name + " ce"] += float(-post[np.flatnonzero(known), ref[known]].sum())
            tally[name + " speech as sil"] += int((said_sil & speech).sum())
            tally[name + " sil as speech"] += int((~said_sil & known & ~speech).sum())
    f, s = tally["frames"], tally["speech"]
    print(f"{f} dev frames, {s} of them speech; {tally['utterances without reference']} utterances without reference")
    for name in ("gmm", "net"):
        print(f"{name}: phone accuracy {tally[name + ' right'] / f:.4f}, on speech frames "
              f"{tally[name + ' speech right'] / s:.4f}, phone cross-entropy {tally[name + ' ce'] / f:.3f}, "
              f"speech taken for silence {tally[name + ' speech as sil'] / s:.4f}, silence taken for speech "
              f"{tally[name + ' sil as speech'] / (f - s):.4f}")


if __name__ == "__main__":
    main()
