"""Figures of each learner at an epoch's end, carried in the epoch's one all-sum.

Every learner puts its own values in its own slots of a list as long as the job
(zeros elsewhere), so the sum gives each learner's values to all without another
collective: its wait at the epoch's end (its work done, the others' not yet) and,
under gossip, the rounds it began and their time since it started (totals: a resumed
learner counts from its restart). The slots depend only on
the strategy's name and the world size, which every learner shares: lists of the
same length on all, as an all-sum needs.
"""

from __future__ import annotations

from typing import Any

from asrtrain.distributed.base import Strategy

GOSSIP_STRATEGIES = ("adpsgd", "h-adpsgd")


def names(strategy: Strategy) -> list[str]:
    """The per-learner figures of this job (none for a single learner)."""
    if strategy.world_size == 1:
        return []
    gossip = ["gossip_rounds_total", "gossip_s_total"] if strategy.name in GOSSIP_STRATEGIES else []
    return ["idle_s", *gossip]


def slots(strategy: Strategy, idle_s: float) -> list[float]:
    """This learner's figures in its slots: ``len(names) × world_size`` values."""
    keys = names(strategy)
    if not keys:
        return []
    stats = getattr(strategy, "stats", {}) or {}
    own = {"idle_s": idle_s, "gossip_rounds_total": float(stats.get("rounds", 0)),
           "gossip_s_total": float(stats.get("gossip_s", 0.0))}
    out = [0.0] * (len(keys) * strategy.world_size)
    for i, key in enumerate(keys):
        out[i * strategy.world_size + strategy.rank] = own[key]
    return out


def row(strategy: Strategy, sums: list[float]) -> dict[str, Any]:
    """``{name}_by_learner`` lists for the epoch row, from the summed slots."""
    n = strategy.world_size
    return {f"{key}_by_learner": [round(v, 3) for v in sums[i * n:(i + 1) * n]]
            for i, key in enumerate(names(strategy))}
