"""Feature-space MLLR: one affine transform per speaker, y = A x + b (Gales 1998).

Each speaker's W = [A b] (d x d+1) maximises the likelihood of its transformed
frames under a global diagonal GMM, the Jacobian included (β log|det A|). With
the GMM's own posteriors γ_tc at the current W (no transcript, so dev and test
are adapted the same way as training), the auxiliary function is

    Q(W) = β log|det A| − ½ Σ_i (w_i G_i w_iᵀ − 2 w_i k_i) + const,
    G_i = Σ_tc γ_tc ξ_t ξ_tᵀ / σ²_ci,  k_i = Σ_tc γ_tc μ_ci ξ_t / σ²_ci,  ξ = [x; 1],

and Gales' row-by-row update maximises it exactly in one row at a time:
w_i = (α p_i + k_i) G_i⁻¹ with p_i the cofactor row of A and α the better root of
a α² + b α − β = 0 (as Kaldi's ``ComputeFmllrMatrixDiagGmmFull``). Posteriors
are recomputed after each iteration, so the whole is EM: neither Q within an
iteration nor the log-likelihood across iterations can decrease (both tracked).

A speaker with too few frames for the 1640 parameters of a full transform gets
a diagonal one (A diagonal, 2 parameters a row), or only a bias, or none; the
log says which.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.adapt.fmllr_config import FMLLR
from asrtrain.adapt.fmllr_jobs import Corpus, Source
from asrtrain.adapt.gmm import CHUNK, DiagGMM, chunk_rows
from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_text

log = logging.getLogger("asrtrain.adapt.fmllr")

KINDS = ("full", "diag", "bias", "none")


@dataclass
class FmllrStats:
    """Sufficient statistics of one speaker under the posteriors of one transform."""

    beta: float
    g: torch.Tensor  # [d, d+1, d+1]
    k: torch.Tensor  # [d, d+1]
    const: float  # Σ_c occ_c (log w_c − ½ Σ_i (log 2πσ²_ci + μ²_ci/σ²_ci))
    entropy: float  # −Σ_tc γ_tc log γ_tc
    loglike: float  # Σ_t log p(W ξ_t), without the Jacobian

    def aux(self, w: torch.Tensor) -> float:
        """Q(W): the expected complete-data log-likelihood, Jacobian included."""
        d = w.shape[0]
        quad = torch.einsum("ij,ijk,ik->", w, self.g, w) - 2.0 * (w * self.k).sum()
        return self.beta * log_abs_det(w[:, :d]) + self.const - 0.5 * float(quad)


def log_abs_det(a: torch.Tensor) -> float:
    return float(torch.linalg.slogdet(a)[1])


def identity(dim: int) -> torch.Tensor:
    """W = [I 0]."""
    return torch.cat([torch.eye(dim, dtype=torch.float64),
                      torch.zeros(dim, 1, dtype=torch.float64)], 1)


def apply_transform(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """y = A x + b for frames [T, d]."""
    d = w.shape[0]
    return x.to(torch.float64) @ w[:, :d].T + w[:, d]


def accumulate(gmm: DiagGMM, x: torch.Tensor, w: torch.Tensor) -> FmllrStats:
    """Statistics of frames [T, d] with the GMM's posteriors of the transformed frames."""
    d = gmm.dim
    gconst, mean_inv, inv = gmm.terms()
    rows, cols = torch.triu_indices(d + 1, d + 1)  # G_i is symmetric: half the products
    g = torch.zeros(d, rows.shape[0], dtype=torch.float64)
    k = torch.zeros(d, d + 1, dtype=torch.float64)
    occ = torch.zeros(gmm.num_components, dtype=torch.float64)
    entropy = loglike = 0.0
    step = chunk_rows(gmm.num_components, CHUNK // 4)
    for i in range(0, x.shape[0], step):
        xs = x[i:i + step].to(torch.float64)
        xi = torch.cat([xs, torch.ones(xs.shape[0], 1, dtype=torch.float64)], 1)
        post, ll = gmm.posteriors(xi @ w.T)
        g += (post @ inv).T @ (xi[:, rows] * xi[:, cols])
        k += (post @ mean_inv).T @ xi
        occ += post.sum(0)
        entropy -= float(torch.special.xlogy(post, post).sum())
        loglike += float(ll.sum())
    full = torch.zeros(d, d + 1, d + 1, dtype=torch.float64)
    full[:, rows, cols] = g
    full[:, cols, rows] = g
    return FmllrStats(float(x.shape[0]), full, k, float(occ @ gconst), entropy, loglike)


def best_row(g: torch.Tensor, k: torch.Tensor, p: torch.Tensor, beta: float) -> torch.Tensor:
    """argmax_w β log|w·p| − ½ w G wᵀ + w·k: w = (α p + k) G⁻¹, α the better root."""
    g_inv_p = torch.linalg.solve(g, p)
    g_inv_k = torch.linalg.solve(g, k)
    a = float(p @ g_inv_p)
    b = float(p @ g_inv_k)
    disc = (b * b + 4.0 * a * beta) ** 0.5
    best, best_val = 0.0, -float("inf")
    for alpha in ((-b - disc) / (2.0 * a), (-b + disc) / (2.0 * a)):
        value = beta * math.log(abs(alpha * a + b)) - 0.5 * alpha * alpha * a
        if value > best_val:
            best, best_val = alpha, value
    return best * g_inv_p + g_inv_k


def update(w: torch.Tensor, stats: FmllrStats, kind: str, passes: int = 10) -> torch.Tensor:
    """Maximise Q over the rows of W (``passes`` sweeps); ``kind`` restricts W."""
    w = w.clone()
    d = w.shape[0]
    if kind == "none":
        return w
    if kind == "bias":  # A = I: dQ/db_i = 0 is linear
        for i in range(d):
            w[i, d] = (stats.k[i, d] - stats.g[i, d, i]) / stats.g[i, d, d]
        return w
    if kind == "full":
        return torch.from_numpy(row_sweeps(w.numpy(), stats.g.numpy(), stats.k.numpy(), stats.beta, passes))
    for i in range(d):  # diagonal rows are independent: one pass
        idx = torch.tensor([i, d])
        sub = best_row(stats.g[i][idx][:, idx], stats.k[i][idx],
                       torch.tensor([1.0, 0.0], dtype=torch.float64), stats.beta)
        w[i, i], w[i, d] = sub[0], sub[1]
    return w


def row_sweeps(w: np.ndarray, g: np.ndarray, k: np.ndarray, beta: float, passes: int) -> np.ndarray:
    """:func:`best_row` for every row of a full W = [A b] (or a square A, G_i and k_i then d x d
    and d: MLLT), ``passes`` sweeps, in numpy, W changed in place: the G_i⁻¹ (fixed
    within an M-step) computed once, and A⁻¹ (whose column i is row i's cofactor direction) kept by
    a Sherman–Morrison update as each row changes, recomputed at each sweep's start. Small
    matrices: a torch call per row cost 0.13 s an M-step at d = 40, this 0.015 s."""
    d = w.shape[0]
    g_inv = np.linalg.inv(g)                         # [d, d+1, d+1]
    g_inv_k = np.einsum("ijk,ik->ij", g_inv, k)     # [d, d+1]
    for _ in range(passes):
        a_inv = np.linalg.inv(w[:, :d])
        for i in range(d):
            g_inv_p = g_inv[i, :, :d] @ a_inv[:, i]  # p = [cofactor row i / det A, 0]
            a = float(a_inv[:, i] @ g_inv_p[:d])
            b = float(a_inv[:, i] @ g_inv_k[i, :d])
            disc = math.sqrt(b * b + 4.0 * a * beta)
            roots = ((-b - disc) / (2.0 * a), (-b + disc) / (2.0 * a))
            alpha = max(roots, key=lambda r: beta * math.log(abs(r * a + b)) - 0.5 * r * r * a)
            row = alpha * g_inv_p + g_inv_k[i]
            u = row[:d] - w[i, :d]
            col = a_inv[:, i].copy()
            a_inv -= np.outer(col, u @ a_inv) / (1.0 + float(u @ col))
            w[i] = row
    return w


@dataclass
class FmllrResult:
    """A speaker's transform and how it was reached."""

    transform: torch.Tensor
    kind: str
    frames: int
    loglikes: list[float] = field(default_factory=list)  # per frame, before each iteration and after
    aux: list[tuple[float, float]] = field(default_factory=list)  # Q before/after each M-step
    mean: torch.Tensor = field(default_factory=lambda: torch.zeros(0))  # mean frame, unadapted


def choose_kind(frames: int, min_full: int, min_diag: int, min_bias: int) -> str:
    """The largest transform the data can support."""
    if frames >= min_full:
        return "full"
    if frames >= min_diag:
        return "diag"
    return "bias" if frames >= min_bias else "none"


def estimate(gmm: DiagGMM, x: torch.Tensor, iters: int = FMLLR.iters, passes: int = FMLLR.passes,
             min_full: int = FMLLR.min_full, min_diag: int = FMLLR.min_diag,
             min_bias: int = 10) -> FmllrResult:
    """A speaker's fMLLR transform from its frames [T, d], starting from identity."""
    if x.shape[1] != gmm.dim:
        raise ValueError(f"frames of dim {x.shape[1]} against a GMM of dim {gmm.dim}")
    kind = choose_kind(x.shape[0], min_full, min_diag, min_bias)
    w = identity(gmm.dim)
    result = FmllrResult(w, kind, int(x.shape[0]), mean=x.to(torch.float64).mean(0))
    for _ in range(iters if kind != "none" else 0):
        stats = accumulate(gmm, x, w)
        result.loglikes.append((stats.loglike + stats.beta * log_abs_det(w[:, :-1])) / stats.beta)
        before = stats.aux(w)
        w = update(w, stats, kind, passes)
        result.aux.append((before, stats.aux(w)))
    result.transform = w
    final = float(gmm.loglike(apply_transform(w, x)).sum()) + x.shape[0] * log_abs_det(w[:, :-1])
    result.loglikes.append(final / max(x.shape[0], 1))
    return result


# --- The command: LDA, global GMM, per-speaker transforms, adapted features ---

#: Data-dir files copied to OUT so it is a complete data dir of the adapted features.
COPIED = ("text", "utt2spk", "spk2utt", "wav.scp", "utt2dur", "spk2gender", "utt2num_frames")


def prepare_fmllr(data: Path, out: Path, lda_dim: int = FMLLR.lda_dim, context: int = FMLLR.context,
                  gmm_components: int = FMLLR.gmm_components, gmm_iters: int = FMLLR.gmm_iters,
                  ali: Path | None = None, model_dir: Path | None = None, iters: int = FMLLR.iters,
                  passes: int = FMLLR.passes, min_full: int = FMLLR.min_full,
                  min_diag: int = FMLLR.min_diag, max_frames: int = FMLLR.max_frames,
                  sat_iters: int = FMLLR.sat_iters, nj: int = 1,
                  job_cmd: str | None = None) -> dict:
    """Estimate (or load) LDA and GMM on DATA, fMLLR per speaker, write adapted features.

    Stages: ``lda`` (``OUT/lda.mat``, from the alignments ``ali``), ``gmm``
    (``OUT/gmm/gmm.npz``, speaker-independent, then refined by ``sat_iters`` rounds of
    speaker-adaptive training), ``trans`` (``OUT/trans.scp``, ``OUT/trans.summary.json``),
    ``feats`` (``OUT/feats.scp`` and the data-dir files). With ``model_dir`` the
    LDA and GMM of an earlier run are used as they are (dev and test).

    ``nj`` jobs (``adapt.jobs``, whole speakers each) make every pass over the corpus:
    the LDA's statistics (summed here), the GMM's subsample of frames, the transforms
    of every SAT round and of stage ``trans``, and the features (an ark a job,
    ``OUT/feats.scp`` in feats.scp's order). The GMM's EM on its capped subsample
    (``max_frames``), the LDA's and the transforms' small files stay in this process.
    The results do not depend on ``nj`` (but for the order of the LDA's sums), so it
    is no stage parameter. With ``job_cmd`` each job is that command's, on any host
    (``adapt.job_cmd``).
    """
    from asrtrain.adapt.featio import open_feats, read_matrix, speakers_of
    from asrtrain.adapt.jobs import split_jobs
    from asrtrain.adapt.lda import load_lda
    from asrtrain.adapt.stages import Stages

    data, out = Path(data), Path(out)
    scp, table = open_feats(data)
    utts = list(table.keys())
    if not utts:
        raise InputError("no utterances", scp)
    dim = read_matrix(table, utts[0], scp).shape[1]
    spk2utt = speakers_of(data, utts)
    utt2spk = {u: s for s, us in spk2utt.items() for u in us}
    corpus = Corpus(data, Source(scp, dim, context, _table=table), utts, spk2utt,
                     split_jobs(data, table, utts, utt2spk, nj), out / "log", job_cmd)
    spliced_dim = (2 * context + 1) * dim
    stages = Stages(out)
    trans_params = {"iters": iters, "passes": passes, "min_full": min_full, "min_diag": min_diag}
    if model_dir is not None:
        model_dir = Path(model_dir)
        corpus.src.lda = load_lda(model_dir / "lda.mat", spliced_dim, lda_dim)
        gmm = DiagGMM.load(model_dir / "gmm" / "gmm.npz")
        _check_gmm(gmm, lda_dim, model_dir)
        stages.upstream = f"model:{model_dir.resolve()}"
        log.info("using the LDA and GMM of %s", model_dir)
    else:
        lda_params = {"data": str(data.resolve()), "ali": str(ali), "lda_dim": lda_dim,
                      "splice": context}
        if not stages.done("lda", lda_params, [out / "lda.mat"]):
            if ali is None:
                raise InputError("estimating the LDA needs the alignments (--ali ALI.scp), or "
                                 "use the LDA and GMM of a training run with --model DIR", data)
            _estimate_lda(corpus, Path(ali), lda_dim, out / "lda.mat")
            stages.finish("lda", lda_params)
        corpus.src.lda = load_lda(out / "lda.mat", spliced_dim, lda_dim)
        gmm_params = {"components": gmm_components, "iters": gmm_iters, "max_frames": max_frames,
                      "sat_iters": sat_iters, "sat_fmllr": trans_params if sat_iters else None}
        if not stages.done("gmm", gmm_params, [out / "gmm" / "gmm.npz"]):
            _train_global_gmm(corpus, gmm_params, trans_params, out / "gmm" / "gmm.npz")
            stages.finish("gmm", gmm_params)
        gmm = DiagGMM.load(out / "gmm" / "gmm.npz")
        _check_gmm(gmm, lda_dim, out)
    if stages.done("trans", trans_params, [out / "trans.scp", out / "trans.summary.json"]):
        summary = _read_summary(out / "trans.summary.json")
    else:
        summary = _estimate_transforms(corpus, gmm, out, trans_params)
        stages.finish("trans", trans_params)
    if not stages.done("feats", {}, [out / "feats.scp"]):
        _write_features(corpus, data, out)
        stages.finish("feats", {})
    return summary


def _check_gmm(gmm: DiagGMM, lda_dim: int, where: Path) -> None:
    if gmm.dim != lda_dim:
        raise InputError(f"the GMM has dimension {gmm.dim}, but --lda-dim is {lda_dim}", where)


def _estimate_lda(corpus: Corpus, ali: Path, lda_dim: int, path: Path) -> None:
    """Class statistics of spliced frames over the aligned utterances, a job's each, summed."""
    from asrtrain.adapt.fmllr_jobs import lda_part
    from asrtrain.adapt.lda import LdaStats, estimate_lda, save_lda
    from asrtrain.data.kaldi_read import open_scp

    table = open_scp(ali, "alignment scp")
    aligned = [u for u in corpus.utts if u in table]
    if not aligned:
        raise InputError("no alignment for any utterance of feats.scp", ali)
    keep = set(aligned)
    jobs = [(corpus.src, [u for u in part if u in keep], ali) for part in corpus.parts]
    answers = corpus.run("LDA statistics", "fmllr-lda", lda_part, jobs, len(aligned))
    classes = max(len(counts) for counts, _, _, _ in answers)
    stats = LdaStats.empty(classes, answers[0][1].shape[1])
    found: dict[str, str] = {}
    for counts, sums, scatter, mismatched in answers:   # job order: a fixed order of sums
        stats.counts[:len(counts)] += torch.from_numpy(counts)
        stats.sums[:len(counts)] += torch.from_numpy(sums)
        stats.scatter += torch.from_numpy(scatter)
        found.update((m.split(" ", 1)[0], m) for m in mismatched)
    mismatched = [found[u] for u in aligned if u in found]
    missing = len(corpus.utts) - len(aligned)
    if missing or mismatched:
        log.warning("LDA: %d utterance(s) without alignment and %d with a frame count that "
                    "differs from the alignment left out%s", missing, len(mismatched),
                    f" (first: {mismatched[0]})" if mismatched else "")
    if len(mismatched) == len(aligned):
        raise InputError(f"no alignment matches its features' frame count ({mismatched[0]})", ali)
    matrix, values = estimate_lda(stats, lda_dim)
    log.info("LDA %d -> %d on %d frames of %d classes; top eigenvalues %s", matrix.shape[1],
             matrix.shape[0], int(stats.counts.sum()), int((stats.counts > 0).sum()),
             " ".join(f"{v:.3g}" for v in values[:5]))
    save_lda(path, matrix)


def _train_global_gmm(corpus: Corpus, params: dict[str, Any], fmllr_params: dict[str, Any],
                      path: Path) -> None:
    """The speaker-independent GMM, then ``sat_iters`` rounds of speaker-adaptive training:
    transforms against the current GMM, EM on the adapted frames. The frames are read
    by the jobs; the EM on their capped subsample runs here."""
    from asrtrain.adapt.gmm import em_iterations, refine_gmm, train_gmm
    from asrtrain.core.progress import Progress

    frames, seen = corpus.sample(params["max_frames"], None)
    log.info("global GMM: %d of %d frames", frames.shape[0], seen)
    total = em_iterations(params["components"], params["iters"])
    with Progress("global GMM (EM iterations)", total) as bar:
        gmm = train_gmm(frames, params["components"], params["iters"], progress=bar)
    for sat in range(params["sat_iters"]):
        results = _estimate_all(corpus, gmm, fmllr_params, f"SAT {sat + 1}: fMLLR transforms",
                                f"fmllr-sat{sat + 1}", quiet=True)
        frames, _ = corpus.sample(params["max_frames"],
                                  {s: r.transform.numpy() for s, r in results.items()})
        with Progress(f"SAT {sat + 1}: GMM on adapted frames", params["iters"]) as bar:
            gmm = refine_gmm(gmm, frames, params["iters"], progress=bar)
        log.info("SAT iteration %d: log-likelihood per frame of the adapted frames %.4f "
                 "(without the Jacobian)",
                 sat + 1, gmm.meta["loglike_per_frame"])
    gmm.meta["sat_iters"] = params["sat_iters"]
    gmm.save(path)


def _estimate_all(corpus: Corpus, gmm: DiagGMM, params: dict[str, Any], description: str,
                  stage: str, quiet: bool = False) -> dict[str, FmllrResult]:
    """Every speaker's transform against ``gmm``, a job's speakers each, in spk2utt's order
    (fallbacks logged unless ``quiet``)."""
    from asrtrain.adapt.fmllr_jobs import gmm_arrays, transforms_part

    arrays = gmm_arrays(gmm)
    jobs = [(corpus.src, corpus.speakers(part), arrays, params) for part in corpus.parts]
    answers: dict[str, dict[str, Any]] = {}
    for answer in corpus.run(description, stage, transforms_part, jobs, len(corpus.spk2utt),
                             unit=" speakers"):
        answers.update(answer)
    results: dict[str, FmllrResult] = {}
    for spk in corpus.spk2utt:
        r = answers[spk]
        res = FmllrResult(torch.from_numpy(r["transform"]), r["kind"], r["frames"], r["loglikes"],
                          r["aux"], torch.from_numpy(r["mean"]))
        if res.kind != "full" and not quiet:
            log.warning("speaker %s has %d frames: %s transform instead of a full one",
                        spk, res.frames, {"diag": "a diagonal", "bias": "a bias-only",
                                          "none": "no"}[res.kind])
        results[spk] = res
    return results


def _estimate_transforms(corpus: Corpus, gmm: DiagGMM, out: Path, params: dict[str, Any]) -> dict:
    """A transform per speaker; figures before and after adaptation into the summary."""
    import json

    from asrtrain.adapt.featio import write_matrices
    from asrtrain.core.atomic import write_text

    results = _estimate_all(corpus, gmm, params, "fMLLR transforms", "fmllr-trans")
    per_speaker = {spk: {"frames": r.frames, "kind": r.kind, "loglike_before": r.loglikes[0],
                         "loglike_after": r.loglikes[-1], "loglikes": r.loglikes, "aux": r.aux}
                   for spk, r in results.items()}
    before = torch.stack([r.mean for r in results.values()])
    after = torch.stack([apply_transform(r.transform, r.mean[None])[0] for r in results.values()])
    summary = _summarise(per_speaker, before, after)
    write_text(out / "trans.summary.json", json.dumps(summary, indent=1) + "\n")
    write_matrices(out / "trans.scp", ((s, r.transform.numpy()) for s, r in results.items()))
    return summary


def _spread(means: torch.Tensor) -> float:
    """Mean squared distance of the speakers' means from their average."""
    return float(((means - means.mean(0)) ** 2).sum(1).mean())


def _summarise(per_speaker: dict[str, dict], before: torch.Tensor, after: torch.Tensor) -> dict:
    frames = sum(s["frames"] for s in per_speaker.values())
    ll_before = sum(s["loglike_before"] * s["frames"] for s in per_speaker.values()) / frames
    ll_after = sum(s["loglike_after"] * s["frames"] for s in per_speaker.values()) / frames
    summary = {
        "speakers": len(per_speaker), "frames": frames,
        "kinds": {k: sum(s["kind"] == k for s in per_speaker.values()) for k in KINDS},
        "loglike_per_frame_before": ll_before, "loglike_per_frame_after": ll_after,
        "speakers_loglike_rose": sum(s["loglike_after"] > s["loglike_before"]
                                     for s in per_speaker.values()),
        "speaker_mean_spread_before": _spread(before), "speaker_mean_spread_after": _spread(after),
        "per_speaker": per_speaker,
    }
    log.info("fMLLR: %d speakers (%s); log-likelihood per frame %.4f -> %.4f (rose for %d); "
             "spread of speaker means %.4f -> %.4f", summary["speakers"],
             ", ".join(f"{v} {k}" for k, v in summary["kinds"].items() if v), ll_before, ll_after,
             summary["speakers_loglike_rose"], summary["speaker_mean_spread_before"],
             summary["speaker_mean_spread_after"])
    return summary


def _read_summary(path: Path) -> dict:
    import json
    return json.loads(read_text(path))


def _write_features(corpus: Corpus, data: Path, out: Path) -> None:
    """Adapted features of every utterance (its speaker's transform), an ark a job, then
    ``OUT/feats.scp`` in feats.scp's order and the data-dir files."""
    from asrtrain.adapt.featio import copy_tables, part_arks, write_scp
    from asrtrain.adapt.fmllr_jobs import features_part

    (out / "feats.scp").unlink(missing_ok=True)   # never pointing into arks being rewritten
    arks = part_arks(out / "data", "feats", len(corpus.parts))
    utt2spk = corpus.utt2spk
    jobs = [(corpus.src, {u: utt2spk[u] for u in part}, out / "trans.scp", ark)
            for part, ark in zip(corpus.parts, arks, strict=True)]
    entries: dict[str, str] = {}
    for answer in corpus.run("fMLLR features", "fmllr-feats", features_part, jobs,
                             len(corpus.utts)):
        entries.update(answer)
    count = write_scp(out / "feats.scp", corpus.utts, entries)
    copy_tables(data, out, COPIED)
    log.info("wrote %d fMLLR-adapted utterances to %s", count, out / "feats.scp")
