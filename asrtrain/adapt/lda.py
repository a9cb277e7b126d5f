"""Frame splicing and linear discriminant analysis, as Kaldi's splice-feats and est-lda.

The fMLLR front end sees ±4 frames of MFCC (9 x 13 = 117 dims) projected to 40:
the projection keeps the directions that best separate the phones (or tied
states) of the training alignments relative to their spread within a class. The
matrix is normalised so the within-class covariance becomes the identity, which
suits the diagonal GMM estimated on top of it. It is saved as a Kaldi matrix
(``lda.mat``, rows = output dims) so Kaldi's ``transform-feats`` reads it too.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import numpy as np
import torch

from asrtrain.core.atomic import atomic_open
from asrtrain.core.errors import InputError

log = logging.getLogger("asrtrain.adapt.lda")


def splice(feats: torch.Tensor, context: int) -> torch.Tensor:
    """Frames [T, D] -> [T, (2*context+1)*D]: frame t-context ... t+context, edges repeated."""
    if context == 0:
        return feats
    t = feats.shape[0]
    index = torch.arange(t)[:, None] + torch.arange(-context, context + 1)[None, :]
    return feats[index.clamp(0, t - 1)].reshape(t, -1)


@dataclass
class LdaStats:
    """Per-class counts, sums, and the total scatter of spliced frames (float64)."""

    counts: torch.Tensor
    sums: torch.Tensor
    scatter: torch.Tensor

    @classmethod
    def empty(cls, num_classes: int, dim: int) -> LdaStats:
        return cls(torch.zeros(num_classes, dtype=torch.float64),
                   torch.zeros(num_classes, dim, dtype=torch.float64),
                   torch.zeros(dim, dim, dtype=torch.float64))

    def add(self, frames: torch.Tensor, labels: torch.Tensor) -> None:
        """Add frames [T, D] with integer class labels [T] (>= 0; the classes grow to fit)."""
        x = frames.to(torch.float64)
        if len(labels) and int(labels.max()) >= len(self.counts):
            grow = int(labels.max()) + 1 - len(self.counts)
            self.counts = torch.cat([self.counts, torch.zeros(grow, dtype=torch.float64)])
            self.sums = torch.cat([self.sums, torch.zeros(grow, x.shape[1], dtype=torch.float64)])
        self.counts.index_add_(0, labels, torch.ones(len(labels), dtype=torch.float64))
        self.sums.index_add_(0, labels, x)
        self.scatter += x.T @ x


def estimate_lda(stats: LdaStats, out_dim: int, floor: float = 1e-6) -> tuple[np.ndarray, np.ndarray]:
    """The LDA matrix [out_dim, D] and all eigenvalues (between/within ratios, descending).

    Solves S_b v = λ S_w v through the Cholesky factor of the within-class scatter
    S_w = L Lᵀ (floored at ``floor`` x its mean diagonal): the rows are the top
    eigenvectors of L⁻¹ S_b L⁻ᵀ mapped back by L⁻ᵀ, so the output has identity
    within-class covariance.
    """
    used = stats.counts > 0
    n = float(stats.counts.sum())
    dim = stats.scatter.shape[0]
    if out_dim > dim:
        raise InputError(f"--lda-dim {out_dim} exceeds the spliced feature dimension {dim}")
    if n <= dim:
        raise InputError(f"{n:.0f} frames cannot estimate an LDA of dimension {dim}")
    classes = int(used.sum())
    if classes - 1 < out_dim:
        log.warning("only %d classes in the alignments: LDA dims beyond %d carry no "
                    "between-class information (pdf alignments, e.g. prepare align's "
                    "pdf.scp, have more classes)", classes, classes - 1)
    means = stats.sums[used] / stats.counts[used, None]
    total_mean = stats.sums.sum(0) / n
    between = (stats.counts[used, None] * means).T @ means / n - torch.outer(total_mean, total_mean)
    total = stats.scatter / n - torch.outer(total_mean, total_mean)
    within = total - between
    within = 0.5 * (within + within.T)
    within += floor * float(torch.diagonal(within).mean()) * torch.eye(dim, dtype=torch.float64)
    chol = torch.linalg.cholesky(within)
    chol_inv = torch.linalg.solve_triangular(chol, torch.eye(dim, dtype=torch.float64), upper=False)
    sym = chol_inv @ between @ chol_inv.T
    values, vectors = torch.linalg.eigh(0.5 * (sym + sym.T))
    order = torch.argsort(values, descending=True)
    matrix = vectors[:, order[:out_dim]].T @ chol_inv
    return matrix.numpy(), values[order].numpy()


def save_lda(path: str | os.PathLike[str], matrix: np.ndarray) -> None:
    """Write a Kaldi binary matrix (kaldiio), atomically."""
    import kaldiio

    with atomic_open(path, "wb") as fh:
        kaldiio.save_mat(fh, np.asarray(matrix, dtype=np.float32))


def load_lda(path: str | os.PathLike[str], in_dim: int | None = None,
             out_dim: int | None = None) -> np.ndarray:
    """Read an LDA matrix; a dimension that does not match is an error naming both."""
    import kaldiio

    try:
        matrix = np.asarray(kaldiio.load_mat(os.fspath(path)), dtype=np.float64)
    except FileNotFoundError:
        raise InputError("LDA matrix not found", path) from None
    except Exception as exc:  # kaldiio raises many kinds on bad data: say them in words
        from asrtrain.data.kaldi_read import failure

        raise InputError(f"not a Kaldi matrix: {failure(f'{os.fspath(path)}:0', exc)}", path) from None
    if matrix.ndim != 2:
        raise InputError(f"not a matrix (shape {matrix.shape})", path)
    if in_dim is not None and matrix.shape[1] not in (in_dim, in_dim + 1):
        raise InputError(f"the LDA matrix takes {matrix.shape[1]}-dim spliced input, but the "
                         f"features spliced give {in_dim} dims", path)
    if out_dim is not None and matrix.shape[0] != out_dim:
        raise InputError(f"the LDA matrix gives {matrix.shape[0]} dims, but --lda-dim is "
                         f"{out_dim}", path)
    return matrix


def apply_lda(spliced: torch.Tensor, matrix: torch.Tensor) -> torch.Tensor:
    """Project spliced frames [T, D]; a [d, D+1] matrix (Kaldi's offset column) is affine."""
    x = spliced.to(matrix.dtype)
    if matrix.shape[1] == x.shape[1] + 1:
        return x @ matrix[:, :-1].T + matrix[:, -1]
    return x @ matrix.T
