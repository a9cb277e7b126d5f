"""A simulated run stopped after k steps and resumed equals the run that never stopped, bit for bit:
the replicas' weights and momenta, the gossip round in flight, the stale-gradient weights and the
loop's RNG all come back from the checkpoint (the stop is the real preemption path: a SIGTERM
recorded, a mid-epoch checkpoint at the next step boundary, :class:`Preempted`)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
import torch
from study_helpers import tiny_cfg

from asrtrain.core.errors import ConfigError, Preempted
from asrtrain.distributed import signals
from asrtrain.study.simulate import SimConfig, simulate
from asrtrain.train.hooks import Hooks

TIMING = {"time", "seconds", "frames_per_s"}


class StopAt(Hooks):
    """Ask for a preemption after step ``k`` (what a SIGTERM's handler records)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def after_step(self, trainer, x, y, lr) -> None:
        if trainer.step == self.k:
            signals._state["signal"] = signal.SIGTERM


def _rows(exp: Path) -> list[dict]:
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def _final(exp: Path) -> dict[str, torch.Tensor]:
    return torch.load(exp / "final.pt", weights_only=False)["state_dict"]


SIMS = {
    "adpsgd-delay1": SimConfig("adpsgd", learners=4, perturb=0.3),
    "random-ring": SimConfig("adpsgd", learners=4, topology="random-ring", reshuffle_every=1, perturb=0.3),
    "stale-gradient": SimConfig("adpsgd", learners=4, delay_by_one="gradient"),
    "no-global-average": SimConfig("adpsgd", learners=4, delay=2, global_average=False),
    "h-adpsgd": SimConfig("h-adpsgd", learners=8, group_size=2),
}


@pytest.mark.parametrize("name", list(SIMS))
@pytest.mark.parametrize("when", ["epoch 1", "epoch 2"])
def test_stopped_and_resumed_equals_unstopped(study_archives, tmp_path, name, when):
    sim = SIMS[name]
    batch = 16 if sim.learners == 4 else 32
    k = 3 if when == "epoch 1" else -(-102 // batch) + 2  # 102 chunks: 7 or 4 steps an epoch
    kw = dict(epochs=2, log_every=1, batch=batch)
    ref, ref_s = simulate(tiny_cfg(study_archives, tmp_path / "ref", **kw), sim)
    exp = tmp_path / "stopped"
    try:
        with pytest.raises(Preempted):
            simulate(tiny_cfg(study_archives, exp, **kw), sim, hooks=StopAt(k))
    finally:
        signals._state["signal"] = None
    assert not (exp / "final.pt").exists()
    got, got_s = simulate(tiny_cfg(study_archives, exp, **kw), sim)
    a, b = _final(tmp_path / "ref"), _final(exp)
    assert all(torch.equal(a[key], b[key]) for key in a)
    assert all(torch.equal(x, y) for px, py in zip(ref_s.params, got_s.params, strict=True)
               for x, y in zip(px, py, strict=True))
    assert ref_s.rounds == got_s.rounds and ref_s.spread == got_s.spread
    assert _rows(tmp_path / "ref") == _rows(exp)
    assert [r["valid_loss"] for r in ref.history] == [r["valid_loss"] for r in got.history]


def test_without_global_average_the_spread_outlives_the_epoch(study_archives, tmp_path):
    on, s_on = simulate(tiny_cfg(study_archives, tmp_path / "on", epochs=2),
                        SimConfig("adpsgd", learners=4, topology="ring"))
    off, s_off = simulate(tiny_cfg(study_archives, tmp_path / "off", epochs=2),
                          SimConfig("adpsgd", learners=4, topology="ring", global_average=False))
    assert s_on.spread[-1] == pytest.approx(0.0, abs=1e-6)  # every replica set to the mean
    assert s_off.spread[-1] > 1e-4  # the replicas keep their own weights
    assert all(r["spread"] > 0 for r in on.history + off.history)  # the epoch row: the spread before averaging
    # the first epoch is the same run either way; the second starts from the mean or from the replicas
    assert on.history[0]["valid_loss"] == off.history[0]["valid_loss"]
    assert on.history[1]["train_loss"] != off.history[1]["train_loss"]
    # the held-out loss is the replicas' mean's, which the model holds at the epoch's end
    weights = [t for name, t in _final(tmp_path / "off").items() if not name.startswith("feat_")]  # not buffers
    assert all(torch.equal(w, m) for w, m in zip(weights, s_off.mean(), strict=True))


def test_a_checkpoint_of_another_simulation_is_refused(study_archives, tmp_path):
    exp = tmp_path / "exp"
    try:
        with pytest.raises(Preempted):
            simulate(tiny_cfg(study_archives, exp), SimConfig("adpsgd", learners=4), hooks=StopAt(2))
    finally:
        signals._state["signal"] = None
    with pytest.raises(ConfigError, match="simulates"):
        simulate(tiny_cfg(study_archives, exp), SimConfig("adpsgd", learners=4, delay=0))
