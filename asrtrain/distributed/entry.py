"""Run a function on every learner of a job, and describe a job's shape without starting it.

:func:`run_job` is the parallel layer's one entry: it starts ``--nproc`` local
workers through torch's elastic launcher, or, inside ``torchrun``/``mpiexec``/``srun``,
joins the job as the rank the environment says, builds the learner's strategy and
calls ``fn(strategy, *args)``. A single learner takes the same path with the base
:class:`Strategy` and no process group. What ``fn`` does (the trainer's loop) is the
caller's business: this package never imports the trainer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from asrtrain.core.errors import AsrtrainError, ConfigError
from asrtrain.distributed import signals
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.groups import resolve_group_size
from asrtrain.distributed.launch import Placement, detect, init_worker
from asrtrain.distributed.local import launch_local
from asrtrain.distributed.logs import LogSpec, learner_logging

log = logging.getLogger("asrtrain.distributed")


def run_job(fn: Callable[..., Any], dist_cfg: DistConfig, *args: Any, seed: int = 0,
            logs: LogSpec | None = None) -> Any:
    """Run ``fn(strategy, *args)`` on every learner; returns rank 0's result (under ``--nproc``)
    or this learner's own (under a launcher: every rank runs this).

    ``logs``: where each learner of a distributed job logs
    (:func:`asrtrain.distributed.logs.learner_logging`).
    """
    place = detect()
    if not dist_cfg.distributed:
        if dist_cfg.nproc > 1 or (place is not None and place.world_size > 1):
            raise ConfigError("--strategy single trains one learner: choose ssgd, adpsgd or h-adpsgd "
                              "for several")
        return _single(fn, args)
    if dist_cfg.elastic and place is not None and place.launcher == "torchrun":
        raise ConfigError("--elastic: torchrun stops every learner when one fails; start the job with "
                          "--nproc, or srun --kill-on-bad-exit=0, or mpiexec -disable-auto-cleanup")
    if dist_cfg.nproc > 1 and place is None:
        # a shape that cannot work is one line here, not one per learner after the start
        resolve_group_size(dist_cfg.strategy, dist_cfg.nproc, dist_cfg.nproc, dist_cfg.group_size)
        results = launch_local(dist_cfg.nproc, _learner, (fn, dist_cfg, args, seed, logs),
                               run_id=f"asrtrain-{os.getpid()}", elastic=dist_cfg.elastic,
                               timeout_s=dist_cfg.timeout_s)
        return results.get(min(results)) if results else None
    if place is None:
        raise AsrtrainError(f"--strategy {dist_cfg.strategy} needs several learners: give --nproc N "
                            "or start the job with torchrun, mpiexec or srun")
    return _learner(fn, dist_cfg, args, seed, logs)


def _single(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    from asrtrain.distributed.base import Strategy

    strategy = Strategy()
    try:
        with signals.caught():
            return fn(strategy, *args)
    finally:
        strategy.close()


def _learner(fn: Callable[..., Any], dist_cfg: DistConfig, args: tuple[Any, ...], seed: int,
             logs: LogSpec | None = None) -> Any:
    """One learner: join the job, build the strategy, run ``fn``, leave cleanly."""
    with signals.caught():
        place, store = init_worker(dist_cfg.backend, dist_cfg.timeout_s)
        with learner_logging(logs, place.rank):
            return _learn(fn, dist_cfg, args, seed, place, store)


def _learn(fn: Callable[..., Any], dist_cfg: DistConfig, args: tuple[Any, ...], seed: int,
           place: Placement, store: Any) -> Any:
    import torch.distributed as dist

    from asrtrain.distributed.strategy import DistributedStrategy

    strategy = DistributedStrategy(dist_cfg, place, store, seed=seed)
    try:
        return fn(strategy, *args)
    except AsrtrainError:
        raise
    except RuntimeError as exc:  # a collective failed: name the learners that went silent
        if dist_cfg.elastic:  # a super-learner that lost a member cannot step: it leaves, the others go on
            from asrtrain.distributed.membership import announce_gone

            announce_gone(strategy.store, place.rank, f"left: a collective failed ({str(exc).splitlines()[0]})")
        dead = strategy.heartbeat.first_silent(wait_s=3.0)
        who = ", ".join(f"rank {r}" for r in dead) or "a peer"
        raise AsrtrainError(f"communication with {who} failed ({_brief(exc)})") from exc
    finally:
        strategy.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def expected_placement(dist_cfg: DistConfig) -> Placement:
    """The job's shape as seen from here: the launcher's environment, or ``--nproc`` local workers."""
    place = detect()
    if place is not None:
        return place
    n = dist_cfg.nproc
    return Placement(0, n, 0, n, "127.0.0.1", None, "nproc" if n > 1 else "none")


def layout_plan(dist_cfg: DistConfig, rounds: int = 4) -> dict[str, Any]:
    """The job's learners, super-learners and gossip ring, without starting it (``--dry-run``)."""
    from asrtrain.distributed.groups import Layout, resolve_group_size
    from asrtrain.distributed.topology import matching, ring_order, spectral_gap

    place = expected_placement(dist_cfg)
    world = place.world_size
    size = resolve_group_size(dist_cfg.strategy, world, place.local_world_size, dist_cfg.group_size)
    n = Layout(0, world, size).num_super
    out: dict[str, Any] = {
        "strategy": dist_cfg.strategy,
        "launcher": place.launcher,
        "learners": world,
        "local_learners": place.local_world_size,
        "super_learner_size": size,
    }
    if not dist_cfg.distributed:
        return out
    out.update({
        "super_learners": {k: Layout(0, world, size).ranks_of(k) for k in range(n)},
        "backend": dist_cfg.backend,
        "timeout_s": dist_cfg.timeout_s,
        "global_average": dist_cfg.global_average,
        "elastic": (f"yes: learners that die are left behind while at least "
                    f"{dist_cfg.min_learners or -(-world // 2)} are alive" if dist_cfg.elastic else "no"),
    })
    if n > 1:
        topo = (dist_cfg.topology, dist_cfg.gossip_seed, dist_cfg.reshuffle_every)
        out["topology"] = dist_cfg.topology
        out["gossip_transport"] = ("shared memory on one host, else the gossip group"
                                   if dist_cfg.gossip_transport == "auto" else "the gossip group")
        out["ring"] = ring_order(n, 0, *topo)
        out["rounds"] = [_pairs(matching(n, r, *topo)) for r in range(rounds)]
        out["spectral_gap"] = round(spectral_gap(n, *topo), 4)
    return out


def _pairs(partner: list[int | None]) -> list[list[int]]:
    """A matching as its pairs, plus a single for a super-learner that sits out."""
    pairs = [[k, p] for k, p in enumerate(partner) if p is not None and k < p]
    pairs += [[k] for k, p in enumerate(partner) if p is None]
    return pairs


def _brief(exc: BaseException) -> str:
    """The first line of a collective's failure, without gloo's source location."""
    import re

    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return re.sub(r"^\[[^\]]*\]\s*", "", first)
