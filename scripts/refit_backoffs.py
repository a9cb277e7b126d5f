"""Give the back-off pdfs of rungs saved before asrtrain.align.backoff existed their pooled
Gaussians, without retraining the ladder.

``prepare align`` now pools the frames of a back-off pdf's leaves into it at every
iteration; rungs saved before kept the flat start's global Gaussian there, which a
decoding graph reaches for unseen contexts. This re-estimates only those pdfs, from one
pass over the training split's final alignments (``ALI/train/pdf.scp``) through each
rung's own front end (the SAT rung with its training speakers' transforms). The other
pdfs are left as they are; the alignments do not change (alignment never visits a
back-off pdf), so a rerun of ``prepare align`` would give the same alignments and
nearly the same models.

    python scripts/refit_backoffs.py ALI_DIR MFCC_TRAIN_DIR OUT_DIR [--rungs tri,lda,sat]
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np
import torch

from asrtrain.align.am import AcousticModel
from asrtrain.align.backoff import backed_off, fill_backoffs
from asrtrain.align.ladder import VAR_FLOOR_RATIO
from asrtrain.align.saved import NUMPY_SCALARS, load_rung
from asrtrain.core.atomic import atomic_open
from asrtrain.lang.pdf_ali import read_alignments


def refit(ali: Path, mfcc: Path, out: Path, rung_name: str) -> int:
    from asrtrain.align.feats import FeatTables
    from asrtrain.data.kaldi_dir import read_utt2spk

    src = ali / "models" / f"{rung_name}.pt"
    rung = load_rung(src)
    rung.front.fmllr = dict(rung.train_fmllr)
    tables = FeatTables(mfcc, read_utt2spk(mfcc / "utt2spk"))
    xs, ps = [], []
    for utt, pdf in read_alignments(ali / "train" / "pdf.scp"):
        x = rung.front.apply(tables.read(utt), tables.utt2spk[utt])
        if x.shape[0] == pdf.shape[0]:
            xs.append(x)
            ps.append(pdf)
    x = torch.from_numpy(np.concatenate(xs))
    p = np.concatenate(ps)
    model: AcousticModel = rung.model
    stats = model.zero_stats()
    model.accumulate(stats, x, p)
    var = x.double().var(0, unbiased=False)
    filled = fill_backoffs(model, stats, backed_off(rung.tree), VAR_FLOOR_RATIO * var)
    with torch.serialization.safe_globals(NUMPY_SCALARS):
        state = torch.load(src, map_location="cpu", weights_only=True)
    state["model"] = model.state_dict()
    out.mkdir(parents=True, exist_ok=True)
    with atomic_open(out / f"{rung_name}.pt", "wb") as fh:
        torch.save(state, fh)
    return filled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ali", type=Path)
    ap.add_argument("mfcc", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--rungs", default="tri,lda,sat")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in ("mono", "tri", "lda", "sat"):
        src = args.ali / "models" / f"{name}.pt"
        if name in args.rungs.split(","):
            print(f"{name}: {refit(args.ali, args.mfcc, args.out, name)} back-off pdfs refitted")
        elif src.exists():
            shutil.copyfile(src, args.out / f"{name}.pt")


if __name__ == "__main__":
    main()
