"""The probes measure what they say: the power iteration finds the dense Hessian's largest eigenvalue,
the spread rows are the replicas' RMS distance to their mean, the sharpness rows carry 2(1+μ)/rate."""

from __future__ import annotations

import json
import math

import pytest
import torch
from study_helpers import tiny_cfg

from asrtrain.study.probes import ProbeConfig, Probes, held_batch, stability_limit, top_eigenvalue
from asrtrain.study.simulate import SimConfig, SimTrainer
from asrtrain.train.step import frame_loss


class FrameLinear(torch.nn.Module):
    """Logits per frame from a normalised linear map: a model whose dense Hessian is cheap to compute
    (the BLSTM's double backward is exercised by the sharpness rows below)."""

    def __init__(self, dim: int, pdfs: int, mean: torch.Tensor, std: torch.Tensor) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(dim, pdfs, dtype=torch.float64)
        self.mean, self.std = mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear((x - self.mean) / self.std)


def test_power_iteration_finds_the_dense_hessians_extreme_eigenvalue(study_archives):
    from asrtrain.data.archive import Archive

    archive = Archive(study_archives[1])
    x, y = held_batch(archive, 8)
    x = x.double()
    torch.manual_seed(0)
    model = FrameLinear(archive.feat_dim, archive.num_pdfs, x.mean((0, 1)), x.std((0, 1)))
    eig = _dense_eigenvalues(model, x, y)
    found = top_eigenvalue(model, x, y, iters=60)
    assert found == pytest.approx(float(eig.max()), rel=1e-3), (found, float(eig.min()), float(eig.max()))


class FrameMLP(torch.nn.Module):
    """A tanh layer with large weights: a loss whose Hessian has negative curvature."""

    def __init__(self, dim: int, hidden: int, pdfs: int, scale: float) -> None:
        super().__init__()
        self.a = torch.nn.Linear(dim, hidden, dtype=torch.float64)
        self.b = torch.nn.Linear(hidden, pdfs, dtype=torch.float64)
        with torch.no_grad():
            self.a.weight.mul_(scale)
            self.b.weight.mul_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.tanh(self.a(x)))


def _dense_eigenvalues(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for p in model.parameters()]
    sizes = [p.numel() for p in model.parameters()]

    def loss_of(flat: torch.Tensor) -> torch.Tensor:
        weights = {n: c.view(s) for n, c, s in zip(names, torch.split(flat, sizes), shapes, strict=True)}
        loss_sum, frames, _ = frame_loss(torch.func.functional_call(model, weights, (x,)), y)
        return loss_sum / frames

    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    return torch.linalg.eigvalsh(torch.autograd.functional.hessian(loss_of, flat))


def test_where_negative_curvature_dominates_the_largest_eigenvalue_is_still_found():
    """Plain power iteration would return the most negative eigenvalue here (|-1.52| > 0.50): the
    stability ratio needs the most positive one."""
    torch.manual_seed(1)
    x, y = torch.randn(4, 3, 5, dtype=torch.float64), torch.randint(0, 4, (4, 3))
    model = FrameMLP(5, 3, 4, scale=6.0)
    eig = _dense_eigenvalues(model, x, y)
    assert -float(eig.min()) > 2 * float(eig.max()) > 0  # the case this test is about
    assert top_eigenvalue(model, x, y, iters=200) == pytest.approx(float(eig.max()), rel=1e-3)


def test_stability_limit_is_the_heavy_ball_bound():
    assert stability_limit(0.5, 0.9) == pytest.approx(7.6)
    assert math.isinf(stability_limit(0.0, 0.9))


def test_spread_and_sharpness_rows(study_archives, tmp_path):
    cfg = tiny_cfg(study_archives, tmp_path / "exp", epochs=1, momentum=0.9)
    trainer = SimTrainer(cfg, SimConfig("adpsgd", learners=4, perturb=0.1))
    seen: list[float] = []

    class Watch(Probes):
        def after_step(self, trainer, x, y, lr):
            seen.append(trainer.sim_strategy.rms_spread())
            super().after_step(trainer, x, y, lr)

    try:
        trainer.fit(Watch(ProbeConfig(spread_every=2, sharpness_every=3, sharpness_chunks=4, sharpness_iters=5)))
    finally:
        trainer.strategy.close()
    rows = [json.loads(line) for line in (tmp_path / "exp" / "metrics.jsonl").read_text().splitlines()]
    spread = [r for r in rows if r["kind"] == "spread"]
    assert [r["step"] for r in spread] == [2, 4, 6]
    assert [r["spread"] for r in spread] == [seen[1], seen[3], seen[5]]
    sharp = [r for r in rows if r["kind"] == "sharpness"]
    assert [r["step"] for r in sharp] == [3, 6]
    for r in sharp:
        assert r["limit"] == pytest.approx(2 * 1.9 / r["lr"]) and r["ratio"] == pytest.approx(r["lambda_max"] / r["limit"])
        assert math.isfinite(r["lambda_max"])
    # measuring does not change the run: the same weights as a run without probes
    plain = SimTrainer(tiny_cfg(study_archives, tmp_path / "plain", epochs=1, momentum=0.9),
                       SimConfig("adpsgd", learners=4, perturb=0.1))
    try:
        plain.fit()
    finally:
        plain.strategy.close()
    assert all(torch.equal(a, b) for pa, pb in zip(trainer.sim_strategy.params, plain.sim_strategy.params, strict=True)
               for a, b in zip(pa, pb, strict=True))
