"""fMLLR: an auxiliary function that never decreases, a known warp undone, fallbacks, the command."""

from __future__ import annotations

import json

import kaldiio
import numpy as np
import pytest
import torch

from asrtrain.adapt import fmllr
from asrtrain.adapt.gmm import DiagGMM, train_gmm


@pytest.fixture(scope="module")
def canonical():
    """A 6-class source in 6 dims, a GMM trained on it, and a sampler."""
    rng = np.random.default_rng(0)
    means = rng.normal(0.0, 3.0, (6, 6))
    stds = rng.uniform(0.5, 1.2, (6, 6))

    def sample(n: int, seed: int) -> np.ndarray:
        r = np.random.default_rng(seed)
        labels = r.integers(0, 6, n)
        return means[labels] + stds[labels] * r.normal(size=(n, 6))

    gmm = train_gmm(torch.from_numpy(sample(6000, 1)), 8, iters=8)
    return gmm, sample


def warp(z: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r = np.random.default_rng(seed)
    a = np.eye(z.shape[1]) + 0.25 * r.normal(size=(z.shape[1],) * 2) / np.sqrt(z.shape[1])
    b = r.normal(0.0, 1.0, z.shape[1])
    return z @ a.T + b, a, b


@pytest.mark.parametrize("kind,min_full,min_diag", [("full", 1, 1), ("diag", 10**9, 1),
                                                    ("bias", 10**9, 10**9)])
def test_auxiliary_function_never_decreases(canonical, kind, min_full, min_diag) -> None:
    gmm, sample = canonical
    x, _, _ = warp(sample(1500, 7), seed=3)
    res = fmllr.estimate(gmm, torch.from_numpy(x), iters=6, min_full=min_full, min_diag=min_diag)
    assert res.kind == kind and len(res.aux) == 6 and len(res.loglikes) == 7
    for before, after in res.aux:  # each M-step
        assert after >= before - 1e-9 * abs(before)
    lls = res.loglikes  # and EM across iterations (posteriors recomputed)
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(lls, lls[1:], strict=False)), lls
    assert lls[-1] > lls[0] + 1.0


def test_every_row_update_raises_the_auxiliary_function(canonical) -> None:
    gmm, sample = canonical
    x = torch.from_numpy(warp(sample(1000, 8), seed=4)[0])
    w = fmllr.identity(6)
    stats = fmllr.accumulate(gmm, x, w)
    values = [stats.aux(w)]
    for _ in range(3):
        w = fmllr.update(w, stats, "full", passes=1)
        values.append(stats.aux(w))
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(values, values[1:], strict=False))
    assert values[1] > values[0]


def test_statistics_reproduce_the_log_likelihood(canonical) -> None:
    """At the E-step point, Q(W) + H(γ) is exactly the log-likelihood with the Jacobian."""
    gmm, sample = canonical
    x = torch.from_numpy(sample(700, 9))
    w = fmllr.identity(6)
    w[:, :6] += 0.1 * torch.randn(6, 6, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    w[:, 6] = 0.3
    stats = fmllr.accumulate(gmm, x, w)
    direct = float(gmm.loglike(fmllr.apply_transform(w, x)).sum()) + 700 * fmllr.log_abs_det(w[:, :6])
    assert stats.aux(w) + stats.entropy == pytest.approx(direct, rel=1e-10)


def test_a_known_warp_is_undone(canonical) -> None:
    gmm, sample = canonical
    z = sample(8000, 11)
    x, a, b = warp(z, seed=5)
    res = fmllr.estimate(gmm, torch.from_numpy(x), iters=10)
    inverse = np.linalg.inv(a)
    w = res.transform.numpy()
    np.testing.assert_allclose(w[:, :6], inverse, atol=0.08)
    np.testing.assert_allclose(w[:, 6], -inverse @ b, atol=0.15)


def test_few_frames_fall_back_to_smaller_transforms(canonical) -> None:
    assert fmllr.choose_kind(500, 400, 100, 10) == "full"
    assert fmllr.choose_kind(399, 400, 100, 10) == "diag"
    assert fmllr.choose_kind(99, 400, 100, 10) == "bias"
    assert fmllr.choose_kind(9, 400, 100, 10) == "none"
    gmm, sample = canonical
    res = fmllr.estimate(gmm, torch.from_numpy(sample(50, 12)), iters=2)
    w = res.transform
    assert res.kind == "bias" and torch.equal(w[:, :6], torch.eye(6, dtype=torch.float64))
    assert bool((w[:, 6] != 0).all())


def run_cli(*args: str):
    from click.testing import CliRunner

    from asrtrain.cli.main import cli
    return CliRunner().invoke(cli, ["prepare", "fmllr", *args], catch_exceptions=False)


SMALL = ["--lda-dim", "6", "--splice", "1", "--gmm-components", "8", "--gmm-iters", "4",
         "--iters", "4", "--sat-iters", "0"]


def test_command_adapts_speakers_resumes_and_reuses(speaker_corpus, tmp_path) -> None:
    from adapt_synthetic import make_corpus

    out = tmp_path / "fm"
    result = run_cli(str(speaker_corpus), str(out), *SMALL, "--ali", str(speaker_corpus / "ali.scp"))
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "trans.summary.json").read_text())
    assert summary["speakers"] == 6 and summary["kinds"]["full"] == 6
    assert summary["speakers_loglike_rose"] == 6
    assert summary["loglike_per_frame_after"] > summary["loglike_per_frame_before"]
    assert summary["speaker_mean_spread_after"] < 0.5 * summary["speaker_mean_spread_before"]
    trans = kaldiio.load_scp(str(out / "trans.scp"))
    assert sorted(trans) == [f"spk{i:02d}" for i in range(6)] and trans["spk00"].shape == (6, 7)
    feats = kaldiio.load_scp(str(out / "feats.scp"))
    src = kaldiio.load_scp(str(speaker_corpus / "feats.scp"))
    assert sorted(feats) == sorted(src) and feats["spk02-003"].shape == (len(src["spk02-003"]), 6)
    assert (out / "utt2spk").read_text() == (speaker_corpus / "utt2spk").read_text()
    assert kaldiio.load_mat(str(out / "lda.mat")).shape == (6, 36)
    assert DiagGMM.load(out / "gmm" / "gmm.npz").dim == 6

    again = run_cli(str(speaker_corpus), str(out), *SMALL, "--ali", str(speaker_corpus / "ali.scp"))
    assert again.exit_code == 0
    logs = [p.read_text() for p in (out / "log").glob("prepare-fmllr.*.log")]
    rerun = [t for t in logs if "skipping" in t]
    assert len(rerun) == 1
    for stage in ("lda", "gmm", "trans", "feats"):
        assert f"stage {stage}: complete, skipping" in rerun[0]

    # a dev set of new speakers, with one speaker too short for a full transform
    dev = make_corpus(tmp_path / "dev", speakers=3, utts=2, dim=12, shift=0.5, rotate=0.3,
                      seed=9, frames=(60, 80))
    result = run_cli(str(dev), str(tmp_path / "fm_dev"), *SMALL, "--model", str(out),
                     "--min-frames-full", "150", "--min-frames-diag", "100")
    assert result.exit_code == 0, result.output
    dev_summary = json.loads((tmp_path / "fm_dev" / "trans.summary.json").read_text())
    kinds = {s: v["kind"] for s, v in dev_summary["per_speaker"].items()}
    assert set(kinds.values()) == {"diag"}  # 120-160 frames each
    log_text = next((tmp_path / "fm_dev" / "log").glob("*.log")).read_text()
    assert "a diagonal transform instead of a full one" in log_text
    assert not (tmp_path / "fm_dev" / "lda.mat").exists()


def test_lda_needs_alignments(speaker_corpus, tmp_path) -> None:
    result = run_cli(str(speaker_corpus), str(tmp_path / "o"), *SMALL)
    assert result.exit_code == 1 and "--ali ALI.scp" in result.output


def test_lda_dimension_mismatch_names_both(speaker_corpus, tmp_path) -> None:
    from adapt_synthetic import make_corpus

    out = tmp_path / "fm"
    assert run_cli(str(speaker_corpus), str(out), *SMALL, "--ali",
                   str(speaker_corpus / "ali.scp")).exit_code == 0
    other = make_corpus(tmp_path / "d7", speakers=2, utts=2, dim=7)
    result = run_cli(str(other), str(tmp_path / "bad"), *SMALL, "--model", str(out))
    assert result.exit_code == 1
    assert "takes 36-dim spliced input, but the features spliced give 21 dims" in result.output


def test_speaker_adaptive_training_fits_the_adapted_data_better(speaker_corpus, tmp_path) -> None:
    """A GMM re-estimated on adapted frames (SAT) explains them better than the SI one."""
    after = {}
    for sat in ("0", "1"):
        out = tmp_path / f"sat{sat}"
        args = [a if a != "0" else sat for a in SMALL]  # --sat-iters is SMALL's only "0"
        result = run_cli(str(speaker_corpus), str(out), *args, "--ali",
                         str(speaker_corpus / "ali.scp"))
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "trans.summary.json").read_text())
        after[sat] = summary["loglike_per_frame_after"]
        assert DiagGMM.load(out / "gmm" / "gmm.npz").meta["sat_iters"] == int(sat)
    assert after["1"] > after["0"]
