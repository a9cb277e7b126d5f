"""Resume: load the newest checkpoint into this learner, on the same job shape or another.

Same number of learners and the same strategy: every learner takes back its own
state (weights where learners' differ, optimizer, RNG, gossip round, and in the
middle of an epoch its hand of work and running totals), so SSGD continues bit for
bit. Another number of learners, or another strategy (a job requeued on fewer GPUs,
12 learners resuming 8's checkpoint):

* weights: the average of the learners' weights where they differ (the global
  average the epoch's end would have taken), else the one model;
* optimizer: the momentum buffers (Adam's two moments) averaged over the learners
  (``optim.mean_state``). For SSGD they are equal, so nothing changes; for ADPSGD they
  are each learner's running estimate of the gradient of nearby models, and their mean
  is the consensus estimate. Re-initialising them to zero would make the first steps
  after the resume about 1/(1 - momentum) = 10 times shorter than the ones before: a
  visible bump;
* the epoch's work: every piece in any learner's hand goes back on the again-list,
  the rest of the epoch is handed out from the same counter, and the running
  totals are summed into the main learner's, so the epoch row still counts every
  frame once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from asrtrain.core.errors import ConfigError
from asrtrain.data.streams import InputSelection
from asrtrain.distributed.base import Strategy
from asrtrain.train.checkpoint import (
    Generators,
    clean_temporaries,
    last_checkpoint,
    load_checkpoint,
    load_learner_state,
    set_rng_state,
)
from asrtrain.train.optim import mean_state, state_kind

log = logging.getLogger("asrtrain.train")


@dataclass(frozen=True)
class Restored:
    """Where a resumed run starts."""

    path: Path
    step: int
    epochs_done: int
    history: list[dict[str, Any]]
    mid_epoch: int | None = None         # the epoch in progress, for a mid-epoch checkpoint
    totals: list[float] | None = None    # this learner's running totals of that epoch
    lr_state: dict[str, Any] | None = None  # the plateau schedule's decisions so far (None: not recorded)


def restore(exp: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, strategy: Strategy,
            model_config: dict[str, Any], device: torch.device | str = "cpu",
            archive: dict[str, Any] | None = None, chosen: InputSelection | None = None,
            generators: Generators | None = None) -> Restored | None:
    """Load the newest checkpoint of ``exp`` into this learner; ``None`` when there is none.
    ``archive``: the training archive's identity, which must be the checkpoint's; ``chosen``: the
    input streams, which must be the checkpoint's too; ``generators``: the learner's own (their
    states come back with the other RNG states)."""
    if strategy.is_main:
        clean_temporaries(exp)
    path = last_checkpoint(exp)
    if path is None:
        return None
    state = load_checkpoint(path, map_location=device)
    trainer = state["trainer"]
    if chosen is not None and not chosen.same_input(trainer.get("input")):
        saved = trainer.get("input")
        then = "the whole input" if saved is None else InputSelection.from_dict(saved).describe()
        raise ConfigError(f"the checkpoint was trained on {then}, this run asks for {chosen.describe()} "
                          "(--streams); use a new EXP or --no-resume", path)
    saved_model = trainer.get("config", {}).get("model")
    if saved_model is not None and saved_model != model_config:
        raise ConfigError(f"the checkpoint's model {saved_model} differs from the one asked for "
                          f"{model_config}; use a new EXP or --no-resume", path)
    saved_archive = trainer.get("archive")
    if archive is not None and saved_archive is not None and saved_archive != archive:
        raise ConfigError(f"the training archive is not the one this run was trained on (checkpoint: "
                          f"{_describe(saved_archive)}; now: {_describe(archive)}); use a new EXP or "
                          "--no-resume", path)
    _check_optimizer(path, state["optimizer"], optimizer)
    ranks = _ranks(trainer)
    if _same_shape(trainer, strategy):
        own = dict(trainer, model=state["model"], optimizer=state["optimizer"])
        if len(ranks) > 1:
            own.update(load_learner_state(path, strategy.rank))
    else:
        own = _merged(path, state, ranks, strategy)
        log.warning("%s", resize_note(trainer, len(ranks), strategy.world_size, strategy.name))
    model.load_state_dict(own["model"])
    optimizer.load_state_dict(own["optimizer"])
    set_rng_state(own["rng"], generators)
    strategy.load_state_dict(own.get("strategy", {}))
    if own.get("work") is not None:
        strategy.restore_work(own["work"])
    log.info("resuming from %s (%d epoch(s) done%s, step %d)", path, trainer["epoch"],
             f", epoch {trainer['mid_epoch']} in progress" if trainer.get("mid_epoch") else "", own["step"])
    return Restored(path, int(own["step"]), int(trainer["epoch"]), list(trainer.get("history", [])),
                    trainer.get("mid_epoch"), own.get("epoch_totals"), trainer.get("lr_state"))


def _check_optimizer(path: Path, saved: dict[str, Any], optimizer: torch.optim.Optimizer) -> None:
    """A ConfigError when the checkpoint's optimizer state is another optimizer's (its buffers
    would not load, or would load as something else)."""
    then, now = state_kind(saved), state_kind(optimizer.state_dict())
    if then is not None and then != now:
        raise ConfigError(f"the checkpoint was trained with --optimizer {then}, this run asks for {now}; "
                          "use a new EXP or --no-resume", path)


def _describe(identity: dict[str, Any]) -> str:
    return f"written {identity.get('written')}, {identity.get('chunks')} chunks"


def _ranks(trainer: dict[str, Any]) -> list[int]:
    """The learners whose state the checkpoint holds (fewer than the job had if some left it)."""
    return list(trainer.get("learner_ranks", range(int(trainer.get("learners", 1)))))


def _same_shape(trainer: dict[str, Any], strategy: Strategy) -> bool:
    """Whether this job can take back every learner's own state (same learners, same super-learners)."""
    saved = trainer.get("strategy", {})
    now = strategy.state_dict()
    name = now.get("strategy", strategy.name)
    return (_ranks(trainer) == list(range(strategy.world_size)) and saved.get("strategy", name) == name
            and saved.get("group_size", 1) == now.get("group_size", 1))


def _merged(path: Path, state: dict[str, Any], ranks: list[int], strategy: Strategy) -> dict[str, Any]:
    """One state for every learner of a job of another shape (see the module's docstring)."""
    trainer = state["trainer"]
    learners = [load_learner_state(path, r) for r in ranks] if len(ranks) > 1 else [dict(trainer, **state)]
    differ = trainer.get("strategy", {}).get("own_weights", False) and len(ranks) > 1
    model = _mean([s["model"] for s in learners]) if differ else state["model"]
    optimizer = mean_state(state["optimizer"], [s["optimizer"] for s in learners])
    mine = learners[ranks.index(strategy.rank)] if strategy.rank in ranks else learners[0]
    merged: dict[str, Any] = {"model": model, "optimizer": optimizer, "rng": mine["rng"], "step": int(trainer["step"]),
                              "strategy": {"rounds": max(int(s.get("strategy", {}).get("rounds", 0)) for s in learners)}}
    work = trainer.get("work")
    if work is not None:
        hands = [p for s in learners for p in s.get("work", {}).get("hand", [])]
        merged["work"] = {"epoch": work["epoch"], "hand": []}
        merged["epoch_totals"] = [0.0] * 5  # [loss, frames, correct, steps] summed by all_sum; [4]: seconds
        if strategy.is_main:
            merged["work"]["store"] = dict(work["store"], again=list(work["store"]["again"]) + hands)
            sums = [sum(vals) for vals in zip(*(s["epoch_totals"][:4] for s in learners), strict=True)]
            merged["epoch_totals"] = sums + [learners[0]["epoch_totals"][4]]
    return merged


def _mean(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean of state dicts (floating tensors; others from the first)."""
    out = {}
    for key, first in states[0].items():
        if torch.is_floating_point(first):
            out[key] = torch.stack([s[key].to(first.device) for s in states]).mean(0)
        else:
            out[key] = first
    return out


def resize_note(trainer: dict[str, Any], then: int, now: int, strategy: str) -> str:
    """What a resume on another job shape does, in one line (the log and the dry-run plan)."""
    saved = trainer.get("strategy", {})
    differ = saved.get("own_weights", False) and then > 1
    parts = [f"written by {then} learner(s) ({saved.get('strategy', 'single')}), resumed by {now} ({strategy})",
             "weights averaged over the learners" if differ else "weights of the one model",
             "optimizer state averaged" if then > 1 else "optimizer state kept"]
    work = trainer.get("work")
    if work is not None:
        parts.append(f"epoch {work['epoch']} in progress: {work['store']['done']} of its blocks done, "
                     "the rest and every piece in hand handed out again among the new learners")
    return "; ".join(parts)


def describe(exp: Path, world: int, strategy: str, group_size: int) -> str:
    """The dry-run plan's line about resuming: from where, and what a change of job shape does."""
    path = last_checkpoint(exp)
    if path is None:
        return "none"
    trainer = load_checkpoint(path)["trainer"]
    ranks = _ranks(trainer)
    saved = trainer.get("strategy", {})
    where = str(path) + (f" (epoch {trainer['mid_epoch']} in progress)" if trainer.get("mid_epoch") else "")
    if ranks == list(range(world)) and saved.get("strategy", strategy) == strategy and \
            saved.get("group_size", 1) == group_size:
        return f"{where}: every learner takes back its own state"
    return f"{where}: {resize_note(trainer, len(ranks), world, strategy)}"
