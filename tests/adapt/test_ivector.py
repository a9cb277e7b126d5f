"""I-vectors: the posterior formula, EM that climbs, Kaldi's online rows, and the speaker."""

from __future__ import annotations

import math

import kaldiio
import numpy as np
import pytest
import torch

from asrtrain.adapt.featio import open_feats
from asrtrain.adapt.gmm import train_gmm
from asrtrain.adapt.ivector import (
    IvectorExtractor,
    collect_stats,
    init_extractor,
    speaker_accuracy,
    train_extractor,
)


def trained(corpus, components: int = 8, dim: int = 10, iters: int = 5):
    scp, table = open_feats(corpus)
    utts = list(table.keys())
    frames = torch.from_numpy(np.concatenate([table[u] for u in utts]))
    ubm = train_gmm(frames, components, iters=6)
    n, f = collect_stats(ubm, (torch.from_numpy(table[u].copy()) for u in utts), len(utts))
    extractor, history = train_extractor(ubm, n, f, dim, iters)
    return extractor, history, table, utts


@pytest.fixture(scope="module")
def model(speaker_corpus):
    return trained(speaker_corpus)


def test_posterior_matches_the_textbook_formula(speaker_corpus) -> None:
    scp, table = open_feats(speaker_corpus)
    x = torch.from_numpy(table["spk00-000"].copy())
    ubm = train_gmm(torch.from_numpy(np.concatenate([table[u] for u in list(table.keys())[:8]])), 4, 3)
    ext = init_extractor(ubm, 3, seed=5)
    post = ubm.posteriors(x)[0].numpy()
    xs = x.numpy().astype(np.float64)
    precision, linear = np.eye(3), np.zeros(3)
    for c in range(4):
        t_c, var = ext.T[c].numpy(), ubm.vars[c].numpy()
        n_c = post[:, c].sum()
        f_c = post[:, c] @ xs - n_c * ubm.means[c].numpy()
        precision += n_c * t_c.T @ np.diag(1 / var) @ t_c
        linear += t_c.T @ (f_c / var)
    want = np.linalg.solve(precision, linear)
    np.testing.assert_allclose(ext.extract(x).numpy(), want, rtol=1e-8)


def test_em_objective_never_decreases(model) -> None:
    _, history, _, _ = model
    assert len(history) == 6
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(history, history[1:], strict=False)), history
    assert history[-1] > history[0] + 0.5  # and it learns something


def test_online_rows_follow_kaldis_convention(model) -> None:
    extractor, _, table, _ = model
    x = torch.from_numpy(table["spk01-002"].copy())
    period = 10
    rows = extractor.extract_online(x, period)
    assert rows.shape == (math.ceil(x.shape[0] / period), extractor.ivector_dim)
    for k in (0, 1, 7, rows.shape[0] - 1):
        want = extractor.extract(x[: k * period + 1])  # frames 0 .. k*period inclusive
        np.testing.assert_allclose(rows[k].numpy(), want.numpy(), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("period", [10, 7, 1])
def test_online_rows_across_batches(model, period) -> None:
    """Longer than one batch of rows: the running statistics carry over exactly."""
    from asrtrain.adapt.ivector import BATCH

    extractor, _, table, utts = model
    x = torch.from_numpy(np.concatenate([table[u] for u in utts[:6]]))
    x = x[: BATCH * period + 3 * period + 1] if period > 1 else x[: 2 * BATCH + 5]
    rows = extractor.extract_online(x, period)
    assert rows.shape[0] == math.ceil(x.shape[0] / period) > BATCH
    for k in (BATCH - 1, BATCH, BATCH + 1, rows.shape[0] - 1):
        want = extractor.extract(x[: k * period + 1])
        np.testing.assert_allclose(rows[k].numpy(), want.numpy(), rtol=1e-7, atol=1e-9)


def split_by_utterance(vectors: dict[str, np.ndarray], first_test: int = 5):
    enrol = {u: v for u, v in vectors.items() if int(u.split("-")[1]) < first_test}
    test = {u: v for u, v in vectors.items() if int(u.split("-")[1]) >= first_test}
    return enrol, test, {u: u.split("-")[0] for u in vectors}


def test_ivectors_identify_held_out_speakers(model) -> None:
    extractor, _, table, utts = model
    vectors = {u: extractor.extract(torch.from_numpy(table[u].copy())).numpy() for u in utts}
    enrol, test, spk = split_by_utterance(vectors)
    assert speaker_accuracy(enrol, spk, test, spk) >= 0.9


def test_without_speaker_differences_identification_is_near_chance(unwarped_corpus) -> None:
    extractor, _, table, utts = trained(unwarped_corpus)
    vectors = {u: extractor.extract(torch.from_numpy(table[u].copy())).numpy() for u in utts}
    enrol, test, spk = split_by_utterance(vectors)
    assert speaker_accuracy(enrol, spk, test, spk) < 0.5  # chance is 1/6


def test_save_and_load(model, tmp_path) -> None:
    extractor, _, table, _ = model
    extractor.ubm.save(tmp_path / "ubm.npz")
    extractor.save(tmp_path / "extractor.npz")
    back = IvectorExtractor.load(tmp_path)
    x = torch.from_numpy(table["spk02-001"].copy())
    np.testing.assert_allclose(back.extract(x).numpy(), extractor.extract(x).numpy())


def run_cli(*args: str):
    from click.testing import CliRunner

    from asrtrain.cli.main import cli
    return CliRunner().invoke(cli, ["prepare", "ivectors", *args], catch_exceptions=False)


def test_command_trains_extracts_resumes_and_reuses(speaker_corpus, unwarped_corpus, tmp_path) -> None:
    out = tmp_path / "iv"
    small = ["--ubm-components", "8", "--dim", "6", "--iters", "3", "--ubm-iters", "3"]
    result = run_cli(str(speaker_corpus), str(out), *small, "--period", "10")
    assert result.exit_code == 0, result.output
    ivec = kaldiio.load_scp(str(out / "ivectors.scp"))
    feats = kaldiio.load_scp(str(speaker_corpus / "feats.scp"))
    assert sorted(ivec) == sorted(feats)
    assert ivec["spk00-000"].shape == (math.ceil(len(feats["spk00-000"]) / 10), 6)
    assert (out / "ivector_period").read_text() == "10\n"
    assert (out / "extractor" / "ubm.npz").is_file() and (out / "extractor" / "extractor.npz").is_file()
    before = (out / "ivectors.scp").stat().st_mtime_ns

    result = run_cli(str(speaker_corpus), str(out), *small, "--period", "10")
    assert result.exit_code == 0
    logs = [p.read_text() for p in (out / "log").glob("prepare-ivectors.*.log")]
    assert len(logs) == 2
    rerun = [t for t in logs if "skipping" in t]
    assert len(rerun) == 1 and "running" not in rerun[0]
    for stage in ("ubm", "extractor", "extract"):
        assert f"stage {stage}: complete, skipping" in rerun[0]
    assert (out / "ivectors.scp").stat().st_mtime_ns == before

    # dev/test: the trained extractor, per-utterance vectors
    dev = tmp_path / "dev"
    result = run_cli(str(unwarped_corpus), str(dev), "--extractor", str(out), "--per-utt")
    assert result.exit_code == 0, result.output
    vec = kaldiio.load_scp(str(dev / "ivectors.scp"))["spk03-004"]
    assert vec.shape == (6,) and not (dev / "extractor").exists()
    assert not (dev / "ivector_period").exists()


def test_extractor_dimension_mismatch_names_both(speaker_corpus, tmp_path) -> None:
    from adapt_synthetic import make_corpus

    other = make_corpus(tmp_path / "d7", speakers=2, utts=2, dim=7)
    out = tmp_path / "iv"
    assert run_cli(str(speaker_corpus), str(out), "--ubm-components", "4", "--dim", "3",
                   "--iters", "1", "--ubm-iters", "1").exit_code == 0
    result = run_cli(str(other), str(tmp_path / "bad"), "--extractor", str(out / "extractor"))
    assert result.exit_code == 1
    assert "takes 12-dim features" in result.output and "has 7-dim features" in result.output
