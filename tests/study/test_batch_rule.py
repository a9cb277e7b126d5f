"""When a batch-study run counts as training at its rate (the report's "largest rate that trains")."""

from __future__ import annotations

import math

from asrtrain.study.batch import BatchGrid, batch_specs, trains
from asrtrain.study.probes import ProbeConfig
from asrtrain.train.config import TrainConfig


def record(*valid: float, diverged: bool = False) -> dict:
    return {"history": [{"valid_loss": v} for v in valid], "best_valid_loss": min(valid), "diverged": diverged}


def test_a_run_that_learns_steadily_trains() -> None:
    assert trains(record(2.552, 1.314, 1.033, 0.838, 0.69, 0.649, 0.634, 0.622), 299)
    assert trains(record(0.9, 0.7, 0.72, 0.71), 299)  # a late rise below the first epoch is overfitting, not a blow-up
    # the baseline at 4x the rule's rate: a 4% bump while warm-up raises the rate is not a blow-up
    assert trains(record(0.959, 1.0, 0.812, 0.728, 0.668, 0.616, 0.638, 0.613), 299)


def test_a_run_that_blew_up_and_came_back_does_not_train() -> None:
    # ADPSGD at batch 512, twice the rule's rate, in the 5 h study: best 2.008 at the end, but 64 in epoch 3
    assert not trains(record(2.266, 53.603, 64.256, 29.971, 9.47, 2.377, 2.168, 2.008), 299)


def test_runs_that_end_worse_never_learn_or_are_not_finite_do_not_train() -> None:
    assert not trains(record(2.137, 5335.5, 2260.5), 299)
    assert not trains(record(5.8, 5.75), 299)  # never below the uniform guess, ln 299 = 5.70
    assert not trains(record(2.0, math.nan, 1.5), 299)
    assert not trains(record(2.0, 1.5, diverged=True), 299)


def test_the_baseline_is_one_spec_with_or_without_the_global_average(tmp_path) -> None:
    """A study without the global average reuses the baseline records of one with it (SSGD has one replica)."""
    base = TrainConfig(archive=tmp_path / "a.h5", exp=tmp_path / "exp", base_batch=16, batch=16)
    specs = {ga: {s.name: s for s in batch_specs(base, BatchGrid(("adpsgd",), (64,), (1.0,), learners=4,
                                                                 global_average=ga), ProbeConfig())}
             for ga in (True, False)}
    assert specs[True]["ssgd-16-x1"].key() == specs[False]["ssgd-16-x1"].key()
    assert specs[True]["adpsgd-64-x1"].key() != specs[False]["adpsgd-64-x1"].key()
