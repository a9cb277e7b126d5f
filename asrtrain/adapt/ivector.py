"""I-vectors: a total-variability model over a diagonal UBM (Dehak et al. 2011).

An utterance's Gaussian mean supervector is modelled as m + T w with a low-rank
T [C·D x R] and w ~ N(0, I); the i-vector is the posterior mean of w given the
utterance's zeroth- and first-order Baum-Welch statistics N_c, F_c (centred on
the UBM means). With diagonal covariances Σ_c,

    L = I + Σ_c N_c T_cᵀ Σ_c⁻¹ T_c,   w = L⁻¹ Σ_c T_cᵀ Σ_c⁻¹ F_c,

so a batch of utterances is one product with the precomputed T_cᵀ Σ_c⁻¹ T_c
[C, R²], one with T/Σ [C·D, R], and batched Cholesky solves. T is trained by EM
(Kaldi's ivector-extractor-acc-stats / -est): accumulate Σ_u N_uc E[w wᵀ] and
Σ_u F_u E[w]ᵀ, solve for each T_c; then the minimum-divergence step rescales T
so that the i-vectors of the training data have identity second moment. The
objective, Σ_u (½ bᵀL⁻¹b − ½ log|L|), is the part of the log-likelihood that
depends on T; EM never decreases it (tested). The UBM's variances stay fixed.

Online i-vectors follow Kaldi's ``ivector-extract-online2``: with period p, row
k of an utterance's matrix is estimated from frames 0 … k·p inclusive (so an
utterance of T frames gets ceil(T/p) rows), without look-ahead, as a streaming
recogniser would have them. Each utterance starts from the prior (no carry-over
between the utterances of a speaker).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.adapt.gmm import DiagGMM, accumulate
from asrtrain.core.atomic import atomic_open
from asrtrain.core.errors import InputError

log = logging.getLogger("asrtrain.adapt.ivector")

#: Utterances per batched posterior computation.
BATCH = 64


@dataclass
class IvectorExtractor:
    """A UBM and a total-variability matrix ``T`` [C, D, R] (float64)."""

    ubm: DiagGMM
    T: torch.Tensor
    posterior_scale: float = 1.0
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.refresh()

    @property
    def ivector_dim(self) -> int:
        return int(self.T.shape[2])

    @property
    def feat_dim(self) -> int:
        return self.ubm.dim

    def refresh(self) -> None:
        """Recompute T_cᵀΣ_c⁻¹T_c and T/Σ after T changes."""
        c, d, r = self.T.shape
        scaled = self.T / self.ubm.vars[:, :, None]
        self._u = torch.einsum("cdr,cds->crs", scaled, self.T).reshape(c, r * r)
        self._proj = scaled.reshape(c * d, r)

    def stats(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Zeroth [C] and centred first-order [C, D] statistics of frames [T, D]."""
        s = accumulate(self.ubm, feats)
        n = s.occ * self.posterior_scale
        f = s.sum_x * self.posterior_scale - n[:, None] * self.ubm.means
        return n, f

    def posterior(self, n: torch.Tensor, f: torch.Tensor, covariance: bool = False
                  ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Posterior mean [B, R] (the i-vectors), covariance [B, R, R] when asked,
        and the per-utterance objective ½ bᵀL⁻¹b − ½ log|L| [B]."""
        b_size, r = n.shape[0], self.ivector_dim
        precision = (n.to(torch.float64) @ self._u).reshape(b_size, r, r)
        precision += torch.eye(r, dtype=torch.float64)
        linear = f.to(torch.float64).reshape(b_size, -1) @ self._proj
        chol = torch.linalg.cholesky(precision)
        mean = torch.cholesky_solve(linear[:, :, None], chol)[:, :, 0]
        logdet = 2.0 * torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
        objective = 0.5 * (linear * mean).sum(1) - 0.5 * logdet
        cov = torch.cholesky_inverse(chol) if covariance else None
        return mean, cov, objective

    def extract(self, feats: torch.Tensor) -> torch.Tensor:
        """The i-vector [R] of one utterance's frames [T, D]."""
        n, f = self.stats(feats)
        return self.posterior(n[None], f[None])[0][0]

    def extract_online(self, feats: torch.Tensor, period: int) -> torch.Tensor:
        """Rows [ceil(T/period), R]: row k from frames 0 … k·period (Kaldi's online rule).

        Row k adds block k to the running statistics (block 0 is frame 0, block k the
        frames (k−1)·period+1 … k·period); rows are solved BATCH at a time, so memory
        stays bounded for any length of recording.
        """
        x = feats.to(torch.float64)
        rows = math.ceil(x.shape[0] / period)
        c, d = self.ubm.num_components, self.ubm.dim
        n_run = torch.zeros(c, dtype=torch.float64)
        f_run = torch.zeros(c, d, dtype=torch.float64)
        out = []
        for first in range(0, rows, BATCH):
            last = min(rows, first + BATCH)  # rows first .. last-1
            n_blk, f_blk = [], []
            if first == 0:
                post0 = self.ubm.posteriors(x[:1])[0] * self.posterior_scale
                n_blk.append(post0)
                f_blk.append(post0[0][None, :, None] * x[0][None, None, :])
            lo = max(1, (first - 1) * period + 1)
            hi = (last - 1) * period + 1
            if hi > lo:
                post = self.ubm.posteriors(x[lo:hi])[0] * self.posterior_scale
                p_blk = post.reshape(-1, period, c)
                n_blk.append(p_blk.sum(1))
                f_blk.append(torch.bmm(p_blk.transpose(1, 2), x[lo:hi].reshape(-1, period, d)))
            n = n_run + torch.cumsum(torch.cat(n_blk), 0)
            f = f_run + torch.cumsum(torch.cat(f_blk), 0)
            n_run, f_run = n[-1], f[-1]
            out.append(self.posterior(n, f - n[:, :, None] * self.ubm.means)[0])
        return torch.cat(out)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write T and the settings to ``.npz`` (the UBM is saved beside it)."""
        with atomic_open(path, "wb") as fh:
            np.savez(fh, T=self.T.numpy(), posterior_scale=np.float64(self.posterior_scale))

    @classmethod
    def load(cls, directory: str | os.PathLike[str]) -> IvectorExtractor:
        """Read ``DIR/ubm.npz`` and ``DIR/extractor.npz`` (DIR or DIR/extractor)."""
        base = Path(directory)
        if not (base / "extractor.npz").is_file() and (base / "extractor" / "extractor.npz").is_file():
            base = base / "extractor"
        ubm = DiagGMM.load(base / "ubm.npz")
        path = base / "extractor.npz"
        try:
            with np.load(path) as data:
                t_matrix = torch.from_numpy(data["T"].astype(np.float64))
                scale = float(data["posterior_scale"])
        except FileNotFoundError:
            raise InputError("no i-vector extractor here (extractor.npz)", base) from None
        except (KeyError, ValueError, OSError) as exc:
            raise InputError(f"not an i-vector extractor written by asrtrain ({exc})", path) from None
        if t_matrix.ndim != 3 or t_matrix.shape[:2] != ubm.means.shape:
            raise InputError(f"T has shape {tuple(t_matrix.shape)} but the UBM is "
                             f"{ubm.num_components}x{ubm.dim}", path)
        return cls(ubm, t_matrix, scale)


def init_extractor(ubm: DiagGMM, ivector_dim: int, seed: int = 0,
                   posterior_scale: float = 1.0) -> IvectorExtractor:
    """A random T scaled by the UBM's standard deviations (EM takes it from there)."""
    gen = torch.Generator().manual_seed(seed)
    c, d = ubm.means.shape
    t_matrix = torch.randn(c, d, ivector_dim, generator=gen, dtype=torch.float64)
    t_matrix *= torch.sqrt(ubm.vars)[:, :, None] / math.sqrt(ivector_dim)
    return IvectorExtractor(ubm, t_matrix, posterior_scale)


def em_step(extractor: IvectorExtractor, n_all: torch.Tensor, f_all: torch.Tensor,
            min_divergence: bool = True) -> float:
    """One EM iteration on stats N [U, C], F [U, C, D]; updates T in place.

    Returns the objective (per frame) under the T before the update.
    """
    c, d, r = extractor.T.shape
    acc_ww = torch.zeros(c, r * r, dtype=torch.float64)
    acc_fw = torch.zeros(c * d, r, dtype=torch.float64)
    second = torch.zeros(r, r, dtype=torch.float64)
    objective = 0.0
    for i in range(0, n_all.shape[0], BATCH):
        n = n_all[i:i + BATCH].to(torch.float64)
        f = f_all[i:i + BATCH].to(torch.float64)
        mean, cov, obj = extractor.posterior(n, f, covariance=True)
        assert cov is not None
        eww = cov + mean[:, :, None] * mean[:, None, :]
        acc_ww += n.T @ eww.reshape(n.shape[0], r * r)
        acc_fw += f.reshape(n.shape[0], c * d).T @ mean
        second += eww.sum(0)
        objective += float(obj.sum())
    a = acc_ww.reshape(c, r, r)
    a = 0.5 * (a + a.transpose(1, 2)) + 1e-10 * torch.eye(r, dtype=torch.float64)
    rhs = acc_fw.reshape(c, d, r).transpose(1, 2)  # [C, R, D]
    t_new = torch.linalg.solve(a, rhs).transpose(1, 2)
    if min_divergence:  # the prior's ML covariance, folded into T: w ~ N(0, I) again
        second /= n_all.shape[0]
        t_new = t_new @ torch.linalg.cholesky(0.5 * (second + second.T))
    extractor.T = t_new.contiguous()
    extractor.refresh()
    return objective / max(float(n_all.sum()), 1.0)


def train_extractor(ubm: DiagGMM, n_all: torch.Tensor, f_all: torch.Tensor, ivector_dim: int,
                    iters: int, seed: int = 0, posterior_scale: float = 1.0,
                    progress: Any = None) -> tuple[IvectorExtractor, list[float]]:
    """Train T by ``iters`` EM iterations; returns the extractor and the objective
    per frame before each iteration and after the last."""
    extractor = init_extractor(ubm, ivector_dim, seed, posterior_scale)
    history: list[float] = []
    for it in range(iters):
        history.append(em_step(extractor, n_all, f_all))
        log.info("i-vector EM iteration %d/%d: objective per frame %.5f before it", it + 1, iters,
                 history[-1])
        if progress is not None:
            progress.advance(1, objective=history[-1])
    history.append(objective_per_frame(extractor, n_all, f_all))
    log.info("i-vector extractor trained: objective per frame %.5f", history[-1])
    return extractor, history


def objective_per_frame(extractor: IvectorExtractor, n_all: torch.Tensor, f_all: torch.Tensor) -> float:
    """The EM objective of the current T on stats N [U, C], F [U, C, D], per frame."""
    total = sum(float(extractor.posterior(n_all[i:i + BATCH], f_all[i:i + BATCH])[2].sum())
                for i in range(0, n_all.shape[0], BATCH))
    return total / max(float(n_all.sum()), 1.0)


def utterance_vector(value: np.ndarray) -> np.ndarray:
    """One vector per utterance: itself, or the last row of an online matrix."""
    value = np.asarray(value, dtype=np.float64)
    return value[-1] if value.ndim == 2 else value


def speaker_accuracy(enrol: dict[str, np.ndarray], enrol_spk: dict[str, str],
                     test: dict[str, np.ndarray], test_spk: dict[str, str]) -> float:
    """Nearest speaker mean by cosine: i-vectors centred on the enrolment mean and
    length-normalised; the fraction of test utterances given their own speaker."""
    keys = sorted(enrol)
    x = np.stack([utterance_vector(enrol[k]) for k in keys])
    centre = x.mean(0)

    def norm(v: np.ndarray) -> np.ndarray:
        v = v - centre
        return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)

    x = norm(x)
    speakers = sorted({enrol_spk[k] for k in keys})
    means = np.stack([x[[enrol_spk[k] == s for k in keys]].mean(0) for s in speakers])
    means /= np.maximum(np.linalg.norm(means, axis=1, keepdims=True), 1e-12)
    tests = sorted(test)
    y = norm(np.stack([utterance_vector(test[k]) for k in tests]))
    picked = np.argmax(y @ means.T, axis=1)
    return float(np.mean([speakers[p] == test_spk[k] for p, k in zip(picked, tests, strict=True)]))


# --- The command: UBM, extractor, extraction; each stage resumable ---


def _check_dim(extractor: IvectorExtractor, dim: int, where: Path, scp: Path) -> None:
    if extractor.feat_dim != dim:
        raise InputError(f"the i-vector extractor takes {extractor.feat_dim}-dim features, but "
                         f"{scp} has {dim}-dim features", where)


def prepare_ivectors(data: Path, out: Path, ubm_components: int = 256, dim: int = 100,
                     period: int = 10, online: bool = True, ubm_iters: int = 10, iters: int = 5,
                     max_frames: int = 500_000, max_utts: int = 10_000,
                     posterior_scale: float = 1.0, extractor_dir: Path | None = None,
                     seed: int = 0, nj: int = 1, job_cmd: str | None = None) -> dict[str, Any]:
    """Train (or load) a UBM and an extractor on DATA, then write ``OUT/ivectors.scp``.

    Stages ``ubm`` and ``extractor`` write ``OUT/extractor/``; ``extract`` writes
    the i-vectors (one vector per utterance, or with ``online`` one row per
    ``period`` frames, with ``OUT/ivector_period`` as Kaldi has it).

    ``nj`` jobs (``adapt.jobs``, whole speakers each) compute the extractor's
    Baum-Welch statistics (each utterance's, put in order here) and the i-vectors (an
    ark a job, ``OUT/ivectors.scp`` in feats.scp's order); the results do not depend on
    ``nj``, so it is no stage parameter. The jobs also gather the UBM's subsample of
    frames; its EM on them (``max_frames`` at most) and the extractor's EM on the
    statistics of at most ``max_utts`` utterances stay in this process. With ``job_cmd``
    each job is that command's, on any host (``adapt.job_cmd``).
    """
    from asrtrain.adapt.featio import open_feats, read_matrix, speakers_of
    from asrtrain.adapt.jobs import split_jobs
    from asrtrain.adapt.stages import Stages

    data, out = Path(data), Path(out)
    scp, table = open_feats(data)
    utts = list(table.keys())
    if not utts:
        raise InputError("no utterances", scp)
    feats = _Feats(scp, table, utts, read_matrix(table, utts[0], scp).shape[1])
    if nj > 1:
        utt2spk = {u: s for s, us in speakers_of(data, utts).items() for u in us}
        feats.parts = split_jobs(data, table, utts, utt2spk, nj)
    feats.log_dir, feats.job_cmd = out / "log", job_cmd
    stages = Stages(out)
    if extractor_dir is not None:
        extractor = IvectorExtractor.load(extractor_dir)
        _check_dim(extractor, feats.dim, Path(extractor_dir), scp)
        log.info("using the extractor of %s (%d Gaussians, %d-dim i-vectors)", extractor_dir,
                 extractor.ubm.num_components, extractor.ivector_dim)
        stages.upstream = f"extractor:{Path(extractor_dir).resolve()}"
    else:
        ubm_params = {"data": str(data.resolve()), "components": ubm_components,
                      "iters": ubm_iters, "max_frames": max_frames}
        if not stages.done("ubm", ubm_params, [out / "extractor" / "ubm.npz"]):
            _train_ubm(feats, ubm_params, out / "extractor" / "ubm.npz")
            stages.finish("ubm", ubm_params)
        ext_params = {"dim": dim, "iters": iters, "max_utts": max_utts,
                      "posterior_scale": posterior_scale, "seed": seed}
        if not stages.done("extractor", ext_params, [out / "extractor" / "extractor.npz"]):
            _train_tv(feats, ext_params, out / "extractor")
            stages.finish("extractor", ext_params)
        extractor = IvectorExtractor.load(out / "extractor")
        _check_dim(extractor, feats.dim, out / "extractor", scp)
    mode = {"online": online, "period": period if online else None, "data": str(data.resolve())}
    if not stages.done("extract", mode, [out / "ivectors.scp"]):
        _extract_all(Path(extractor_dir or out / "extractor"), extractor, feats, out,
                     period if online else None)
        stages.finish("extract", mode)
    return {"utterances": len(utts), "ivector_dim": extractor.ivector_dim,
            "components": extractor.ubm.num_components, "online": online}


@dataclass
class _Feats:
    """DATA's feats.scp, opened lazily, the dimension every matrix must have, and the
    utterances of each job (whole speakers; one job: all)."""

    scp: Path
    table: Any
    utts: list[str]
    dim: int
    parts: list[list[str]] = field(default_factory=list)
    log_dir: Path = Path("log")
    job_cmd: str | None = None       # each job a command (``adapt.job_cmd``); None: local

    def __post_init__(self) -> None:
        self.parts = self.parts or [list(self.utts)]

    def __call__(self, utt: str) -> torch.Tensor:
        from asrtrain.adapt.featio import read_matrix
        return torch.from_numpy(read_matrix(self.table, utt, self.scp, self.dim))


def _train_ubm(feats: _Feats, params: dict[str, Any], path: Path) -> None:
    from asrtrain.adapt.gmm import em_iterations, subsample_frames, train_gmm
    from asrtrain.core.progress import Progress

    if len(feats.parts) == 1 and feats.job_cmd is None:
        frames, seen = subsample_frames((feats(u).numpy() for u in feats.utts),
                                        params["max_frames"])
    else:
        frames, seen = _sample(feats, params["max_frames"])
    log.info("UBM: %d of %d frames (every %d-th)", frames.shape[0], seen,
             max(1, round(seen / frames.shape[0])))
    total = em_iterations(params["components"], params["iters"])
    with Progress("UBM (EM iterations)", total) as bar:
        ubm = train_gmm(frames, params["components"], params["iters"], progress=bar)
    ubm.save(path)


def _sample(feats: _Feats, max_frames: int) -> tuple[torch.Tensor, int]:
    """``gmm.subsample_frames`` of every utterance, each job taking its utterances' share."""
    from asrtrain.adapt.featio import frame_counts
    from asrtrain.adapt.ivector_jobs import sample_part
    from asrtrain.adapt.jobs import run_jobs, stream_offsets

    counts = frame_counts(feats.scp.parent, feats.table, feats.utts)
    stride, offsets, seen = stream_offsets(feats.utts, counts, max_frames)
    jobs = [(feats.scp, part, feats.dim, {u: offsets[u] for u in part},
             {u: counts[u] for u in part}, stride) for part in feats.parts]
    rows: dict[str, np.ndarray] = {}
    for answer in run_jobs("UBM frames", "ivectors-frames", sample_part, jobs, feats.log_dir,
                           len(feats.utts), job_cmd=feats.job_cmd):
        rows.update(answer)
    return torch.from_numpy(np.concatenate([rows[u] for u in feats.utts])), seen


def _train_tv(feats: _Feats, params: dict[str, Any], directory: Path) -> None:
    """The total-variability matrix on (at most ``max_utts``) training utterances, their
    statistics computed by the jobs."""
    from asrtrain.adapt.ivector_jobs import stats_part
    from asrtrain.adapt.jobs import run_jobs
    from asrtrain.core.progress import Progress

    ubm = DiagGMM.load(directory / "ubm.npz")
    chosen = _spread(feats.utts, params["max_utts"])
    picked = set(chosen)
    jobs = [(feats.scp, [u for u in part if u in picked], feats.dim, directory / "ubm.npz",
             params["posterior_scale"]) for part in feats.parts]
    rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for utts, n_part, f_part in run_jobs("Baum-Welch statistics", "ivectors-stats", stats_part,
                                         jobs, feats.log_dir, len(chosen), job_cmd=feats.job_cmd):
        rows.update((u, (n_part[i], f_part[i])) for i, u in enumerate(utts))
    n_all = torch.from_numpy(np.stack([rows[u][0] for u in chosen]))
    f_all = torch.from_numpy(np.stack([rows[u][1] for u in chosen]))
    del rows
    with Progress("i-vector extractor (EM iterations)", params["iters"]) as bar:
        extractor, _ = train_extractor(ubm, n_all, f_all, params["dim"], params["iters"],
                                       params["seed"], params["posterior_scale"], progress=bar)
    extractor.save(directory / "extractor.npz")


def _extract_all(where: Path, extractor: IvectorExtractor, feats: _Feats, out: Path,
                 period: int | None) -> None:
    """Write ``OUT/ivectors.scp`` (and ``OUT/ivector_period`` first when online): each job
    loads the extractor from ``where`` and writes its ark."""
    from asrtrain.adapt.featio import part_arks, write_scp
    from asrtrain.adapt.ivector_jobs import extract_part
    from asrtrain.adapt.jobs import run_jobs
    from asrtrain.core.atomic import write_text

    if period is not None:
        write_text(out / "ivector_period", f"{period}\n")
    else:
        (out / "ivector_period").unlink(missing_ok=True)
    (out / "ivectors.scp").unlink(missing_ok=True)   # never pointing into arks being rewritten
    arks = part_arks(out / "data", "ivectors", len(feats.parts))
    jobs = [(feats.scp, part, feats.dim, where, period, ark)
            for part, ark in zip(feats.parts, arks, strict=True)]
    entries: dict[str, str] = {}
    for answer in run_jobs("i-vectors", "ivectors-extract", extract_part, jobs, feats.log_dir,
                           len(feats.utts), job_cmd=feats.job_cmd):
        entries.update(answer)
    count = write_scp(out / "ivectors.scp", feats.utts, entries)
    log.info("wrote %d %s i-vectors of dimension %d to %s", count,
             "per-utterance" if period is None else f"online (period {period})",
             extractor.ivector_dim, out / "ivectors.scp")


def _spread(utts: list[str], limit: int) -> list[str]:
    """At most ``limit`` utterances, evenly spread (all speakers keep a share)."""
    if len(utts) <= limit:
        return utts
    step = len(utts) / limit
    chosen = [utts[int(i * step)] for i in range(limit)]
    log.info("extractor training on %d of %d utterances (--max-utts)", len(chosen), len(utts))
    return chosen


def collect_stats(ubm: DiagGMM, utterances: Iterable[torch.Tensor], count: int,
                  posterior_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Baum-Welch statistics of ``count`` utterances' frames, kept for all EM iterations
    (the UBM does not change): N [U, C] float64, F [U, C, D] float32 (half the memory)."""
    probe = IvectorExtractor(ubm, torch.zeros(ubm.num_components, ubm.dim, 1, dtype=torch.float64),
                             posterior_scale)
    n_all = torch.zeros(count, ubm.num_components, dtype=torch.float64)
    f_all = torch.zeros(count, ubm.num_components, ubm.dim, dtype=torch.float32)
    for i, x in enumerate(utterances):
        n, f = probe.stats(x)
        n_all[i], f_all[i] = n, f.to(torch.float32)
    return n_all, f_all
