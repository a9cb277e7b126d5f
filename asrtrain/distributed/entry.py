"""Entry points for ``asrtrain train``: run a job (launching or joining workers) and plan one.

``run`` starts ``--nproc`` local workers through torch's elastic launcher, or, inside
``torchrun``/``mpiexec``/``srun``, joins the job as the rank the environment says,
and runs the trainer's loop with a :class:`DistributedStrategy` in each worker.
``plan`` says what a job would do without starting it (``--dry-run``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from asrtrain.core.errors import AsrtrainError, ConfigError
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.launch import Placement, detect, init_worker, launch_local
from asrtrain.distributed.logs import LogSpec, learner_logging, parent_spec

log = logging.getLogger("asrtrain.distributed")


def run_job(fn: Callable[..., Any], dist_cfg: DistConfig, *args: Any, seed: int = 0,
            logs: LogSpec | None = None) -> Any:
    """Run ``fn(strategy, *args)`` on every learner; returns rank 0's result.

    Launches ``nproc`` local workers when ``nproc`` > 1 and no launcher started
    this process; otherwise this process is one worker of the job. ``logs``: where
    each learner logs (:func:`asrtrain.distributed.logs.learner_logging`).
    """
    if dist_cfg.nproc > 1 and detect() is None:
        results = launch_local(dist_cfg.nproc, _worker, (fn, dist_cfg, args, seed, logs),
                               run_id=f"asrtrain-{os.getpid()}")
        return results.get(0)
    if detect() is None and dist_cfg.nproc == 1:
        raise AsrtrainError(f"--strategy {dist_cfg.strategy} needs several learners: give --nproc N "
                            "or start the job with torchrun, mpiexec or srun")
    return _worker(fn, dist_cfg, args, seed, logs)


def _worker(fn: Callable[..., Any], dist_cfg: DistConfig, args: tuple[Any, ...], seed: int,
            logs: LogSpec | None = None) -> Any:
    """One learner: join the job, build the strategy, run ``fn``, leave cleanly.

    Under the elastic launcher an exception is recorded for the agent, so the
    parent's error names the rank and the message.
    """
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):
        from torch.distributed.elastic.multiprocessing.errors import record

        return record(_learner)(fn, dist_cfg, args, seed, logs)
    return _learner(fn, dist_cfg, args, seed, logs)


def _learner(fn: Callable[..., Any], dist_cfg: DistConfig, args: tuple[Any, ...], seed: int,
             logs: LogSpec | None = None) -> Any:
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
        dead = strategy.heartbeat.stale(wait_s=3.0)
        who = ", ".join(f"rank {r}" for r in dead) or "a peer"
        raise AsrtrainError(f"learner rank {place.rank}: communication with {who} failed: "
                            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    finally:
        strategy.close()
        if dist.is_initialized():
            dist.destroy_process_group()


def _train(strategy: Any, train_cfg: Any) -> Any:
    """The trainer's loop with this learner's strategy (module level: picklable for spawn)."""
    from asrtrain.train.trainer import train

    return train(train_cfg, strategy=strategy)


def run(train_cfg: Any, dist_cfg: DistConfig, main_log: Path | None = None) -> Any:
    """Train with ``dist_cfg``'s strategy; returns what rank 0's trainer returned.

    Every learner logs to ``EXP/log/train.rank<R>.log``; rank 0 also to the console
    and to ``main_log`` (the command's run log).
    """
    if dist_cfg.strategy == "single":
        place = detect()
        if dist_cfg.nproc > 1 or (place is not None and place.world_size > 1):
            raise ConfigError("--strategy single trains one learner: choose ssgd, adpsgd or h-adpsgd "
                              "for several")
        from asrtrain.train.trainer import train

        return train(train_cfg)
    logs = parent_spec(Path(train_cfg.exp) / "log", main_log)
    return run_job(_train, dist_cfg, train_cfg, seed=int(getattr(train_cfg, "seed", 0)), logs=logs)


def expected_placement(dist_cfg: DistConfig) -> Placement:
    """The job's shape as seen from here: the launcher's environment, or ``--nproc`` local workers."""
    place = detect()
    if place is not None:
        return place
    n = dist_cfg.nproc
    return Placement(0, n, 0, n, "127.0.0.1", None, "nproc" if n > 1 else "none")


def plan(train_cfg: Any, dist_cfg: DistConfig, rounds: int = 4) -> dict[str, Any]:
    """What the job would do, without starting it: for ``asrtrain train --dry-run``."""
    from asrtrain.distributed.groups import Layout, resolve_group_size
    from asrtrain.distributed.topology import matching, ring_order, spectral_gap

    place = expected_placement(dist_cfg)
    world = place.world_size
    size = resolve_group_size(dist_cfg.strategy, world, place.local_world_size, dist_cfg.group_size)
    lay = Layout(0, world, size)
    n = lay.num_super
    out: dict[str, Any] = _single_plan(train_cfg)
    out.update({
        "strategy": dist_cfg.strategy,
        "launcher": place.launcher,
        "learners": world,
        "local_learners": place.local_world_size,
        "super_learner_size": size,
        "super_learners": {k: lay.ranks_of(k) for k in range(n)},
        "backend": dist_cfg.backend,
        "timeout_s": dist_cfg.timeout_s,
        "global_average": dist_cfg.global_average,
    })
    if n > 1:
        out["topology"] = dist_cfg.topology
        out["gossip_transport"] = ("shared memory on one host, else the gossip group"
                                   if dist_cfg.gossip_transport == "auto" else "the gossip group")
        out["ring"] = ring_order(n, 0, dist_cfg.topology, dist_cfg.gossip_seed, dist_cfg.reshuffle_every)
        out["rounds"] = [_pairs(matching(n, r, dist_cfg.topology, dist_cfg.gossip_seed,
                                         dist_cfg.reshuffle_every)) for r in range(rounds)]
        out["spectral_gap"] = round(spectral_gap(n, dist_cfg.topology, dist_cfg.gossip_seed,
                                                 dist_cfg.reshuffle_every), 4)
    batch = _attr(train_cfg, "batch")
    if batch is not None:
        per = train_cfg.per_learner_batch(world) if hasattr(train_cfg, "per_learner_batch") else batch // world
        out["batch_per_learner"] = int(per)
        out["effective_batch"] = int(per) * world
        out["super_learner_batch"] = int(per) * size
    lrs = _lr_schedule(train_cfg, world)
    if lrs is not None:
        out["lr by epoch"] = ", ".join(f"{v:.4g}" for v in lrs)
    return out


def _single_plan(train_cfg: Any) -> dict[str, Any]:
    """The trainer's own plan (archive, model, schedule) when the config is a real one."""
    if train_cfg is None or not hasattr(train_cfg, "archive"):
        return {}
    from asrtrain.train.trainer import plan as single_plan

    return dict(single_plan(train_cfg))


def _pairs(partner: list[int | None]) -> list[list[int]]:
    """A matching as its pairs, plus a single for a super-learner that sits out."""
    pairs = [[k, p] for k, p in enumerate(partner) if p is not None and k < p]
    pairs += [[k] for k, p in enumerate(partner) if p is None]
    return pairs


def _attr(cfg: Any, name: str) -> Any:
    if cfg is None:
        return None
    return cfg.get(name) if isinstance(cfg, dict) else getattr(cfg, name, None)


def _lr_schedule(train_cfg: Any, world: int) -> Any:
    """Per-epoch learning rates from the trainer's schedule, when it offers one."""
    try:
        from asrtrain.train import schedule
    except ImportError:
        return None
    fn = getattr(schedule, "plan", None) or getattr(schedule, "epoch_lrs", None)
    if fn is None or train_cfg is None:
        return None
    try:
        return fn(train_cfg, world)
    except TypeError:
        return None
