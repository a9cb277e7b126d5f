"""Run alone (``python kaldi_gmm_check.py [pdfs comps dim frames]``): one Viterbi EM step of asrtrain's
AcousticModel and of Kaldi's AmDiagGmm (kaldi-hmm-gmm: AccumAmDiagGmm +
mle_am_diag_gmm_update) from the same start on the same aligned frames; prints JSON
with the largest differences and both accumulation times.

A script of its own because importing kaldifst before kaldi_hmm_gmm hangs
(shared/FACTS.md), and a test process may have imported kaldifst already.
"""

from __future__ import annotations

import json
import time

import kaldi_hmm_gmm as k
import numpy as np
import torch

from asrtrain.align.am import AcousticModel


def main(pdfs: int = 3, comps: int = 2, dim: int = 5, frames: int = 6000) -> None:
    torch.set_num_threads(1)   # as prepare align runs it (and as Kaldi's binding does)
    g = np.random.default_rng(0)
    means = g.normal(0.0, 2.0, (pdfs, comps, dim))
    vars_ = g.uniform(0.5, 2.0, (pdfs, comps, dim))
    weights = np.full((pdfs, comps), 1.0 / comps)
    pdf = g.integers(0, pdfs, frames)
    which = g.integers(0, comps, frames)
    x = (means[pdf, which] + g.normal(0.0, 1.0, (frames, dim)) * 0.8).astype(np.float32)

    ours = AcousticModel(torch.from_numpy(means), torch.from_numpy(vars_),
                         torch.from_numpy(np.log(weights)))
    ours.accumulate(ours.zero_stats(), x[:10], pdf[:10])   # torch's first-call costs
    t0 = time.perf_counter()
    stats = ours.zero_stats()
    ours.accumulate(stats, x, pdf)
    t_ours = time.perf_counter() - t0
    ours.update(stats, torch.full((dim,), 1e-3, dtype=torch.float64))

    am = k.AmDiagGmm()
    for p in range(pdfs):
        gmm = k.DiagGmm(comps, dim)
        gmm.set_weights(weights[p].astype(np.float32))
        gmm.set_invvars_and_means((1.0 / vars_[p]).astype(np.float32), means[p].astype(np.float32))
        gmm.compute_gconsts()
        am.add_pdf(gmm)
    acc = k.AccumAmDiagGmm()
    flags = k.str_to_gmm_flags("mvw")
    acc.init(am, flags)
    t0 = time.perf_counter()
    for t in range(frames):
        acc.accumulate_for_gmm(am, x[t], int(pdf[t]), 1.0)
    t_kaldi = time.perf_counter() - t0
    k.mle_am_diag_gmm_update(k.MleDiagGmmOptions(), acc, flags, am)

    diff = {"means": 0.0, "vars": 0.0, "weights": 0.0}
    removed = 0
    for p in range(pdfs):
        gmm = am.get_pdf(p)
        km, kv, kw = np.asarray(gmm.means), 1.0 / np.asarray(gmm.inv_vars), np.asarray(gmm.weights)
        if km.shape[0] != comps:   # Kaldi removed a Gaussian with too little data; ours keeps it
            removed += comps - km.shape[0]
            continue
        # Kaldi keeps component order; ours too (no mixing up here)
        diff["means"] = max(diff["means"], float(np.abs(km - ours.means[p].numpy()).max()))
        diff["vars"] = max(diff["vars"], float(np.abs(kv - ours.vars[p].numpy()).max()))
        diff["weights"] = max(diff["weights"],
                              float(np.abs(kw - torch.exp(ours.logw[p]).numpy()).max()))
    print(json.dumps({"max_abs_diff": diff, "kaldi_removed": removed, "seconds": {"asrtrain": t_ours, "kaldi": t_kaldi},
                      "frames": frames}))


if __name__ == "__main__":
    import sys

    main(*(int(a) for a in sys.argv[1:]))
