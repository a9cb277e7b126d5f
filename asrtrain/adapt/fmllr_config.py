"""The defaults of fMLLR estimation, in one place (no torch: the CLI reads them when it lists
its options, and ``asrtrain.adapt.fmllr`` takes its keyword defaults from them)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FmllrConfig:
    """``asrtrain prepare fmllr``'s options as the library defines them."""

    lda_dim: int = 40            # output of the LDA, and of the fMLLR features
    context: int = 4             # frames spliced each side before the LDA (--splice)
    gmm_components: int = 256    # Gaussians of the global diagonal GMM
    gmm_iters: int = 10          # EM iterations of the GMM at its full size
    iters: int = 5               # fMLLR iterations (posteriors recomputed each time)
    passes: int = 10             # row-by-row sweeps per fMLLR iteration
    min_full: int = 400          # fewer frames for a speaker: a diagonal transform
    min_diag: int = 100          # fewer still: a bias-only transform
    max_frames: int = 500_000    # frames (evenly subsampled) the GMM is trained on
    sat_iters: int = 1           # rounds of speaker-adaptive training of the GMM


#: The defaults every caller shares.
FMLLR = FmllrConfig()
