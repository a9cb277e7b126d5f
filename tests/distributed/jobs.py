"""Distributed test jobs that run the real loop: ``Trainer`` with a tiny BLSTM on a tiny archive.

Nothing here trains: :class:`Recorder` is a :class:`~asrtrain.train.hooks.Hooks` that
watches the loop (batches, weights, timings, the strategy's counters) and can stop
a learner at a chosen step, dead or hung. :func:`scenarios` runs several jobs in one
launch of workers (starting 4 workers costs ~10 s on 2 cores); the script form runs
every strategy under ``torchrun``/``mpiexec``:

    python tests/distributed/jobs.py OUT.json TRAIN.h5 EXP_ROOT [--strategies ssgd,adpsgd,h-adpsgd]

and ``jobs.py chunks …`` runs ``asrtrain train``'s own call with a :class:`ChunkLog`,
for the tests that kill and resume a job.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from asrtrain.data.loader import IGNORE_INDEX  # noqa: E402
from asrtrain.model.config import ModelConfig  # noqa: E402
from asrtrain.train.config import TrainConfig  # noqa: E402
from asrtrain.train.hooks import Hooks  # noqa: E402

TINY_MODEL = ModelConfig(hidden=8, layers=1, proj=0)


def tiny_config(train: Path, exp: Path, **kw: Any) -> TrainConfig:
    """A seconds-long run: tiny BLSTM, blocks of 8 chunks, constant rate, one thread."""
    base: dict[str, Any] = dict(archive=train, exp=exp, epochs=1, batch=8, base_batch=8, lr=0.2,
                                warmup_epochs=0, momentum=0.5, block_chunks=8, model=TINY_MODEL,
                                log_every=1000, num_threads=1, prefetch=2)
    base.update(kw)
    return TrainConfig(**base)


def flat(model: torch.nn.Module) -> list[float]:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()


@dataclasses.dataclass
class Recorder(Hooks):
    """Watches one learner's loop; its fields say what to record or do, ``rec`` is what it saw."""

    record_weights: bool = False
    record_batches: bool = False
    perturb: float = 0.0          # add rank-seeded noise to the weights at the start
    step_sleep_s: float = 0.0     # emulated compute per step
    die_rank: int | None = None   # this rank exits (or hangs) before step die_step
    die_step: int = 2
    hang: bool = False
    death_mark: str = ""          # a file the dying rank writes its wall-clock time of death to
    rec: dict[str, Any] = dataclasses.field(default_factory=dict)

    def start(self, trainer: Any) -> None:
        rank = trainer.strategy.rank
        if self.perturb:
            with torch.no_grad():
                g = torch.Generator().manual_seed(rank + 1)
                for p in trainer.model.parameters():
                    p.add_(self.perturb * torch.randn(p.shape, generator=g).to(p.device))
        self.rec = {"rank": rank, "host": socket.gethostname(), "initial": flat(trainer.model), "weights": [],
                    "batches": [], "lrs": [], "iter_times": [], "epochs": [], "steps": 0}
        self._last: float | None = None

    def before_step(self, trainer: Any, step: int) -> None:
        if self.die_rank == trainer.strategy.rank and step == self.die_step:
            if self.death_mark:
                Path(self.death_mark).write_text(repr(time.time()))
            if self.hang:
                time.sleep(3600)
            os._exit(3)
        if self.step_sleep_s:
            time.sleep(self.step_sleep_s)

    def after_step(self, trainer: Any, x: Any, y: Any, lr: float) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.rec["iter_times"].append(now - self._last)
        self._last = now
        self.rec["steps"] += 1
        self.rec["lrs"].append(lr)
        if self.record_batches:
            real = bool((y != IGNORE_INDEX).any())
            self.rec["batches"].append([x.tolist(), y.tolist()] if real else None)
        if self.record_weights:
            self.rec["weights"].append(flat(trainer.model))

    def end_epoch(self, trainer: Any, row: dict[str, Any]) -> None:
        self._last = None
        self.rec["epochs"].append({**trainer.strategy.stats, "row": row})
        self.rec["final"] = flat(trainer.model)
        self.rec["group_size"] = getattr(getattr(trainer.strategy, "layout", None), "group_size", 1)


class ChunkLog(Hooks):
    """Appends every trained chunk (a hash of its features) to ``DIR/rank<R>.log``, flushed per step.

    A run killed at any moment leaves the steps it finished; ``start S`` opens each
    run's part (S: the learner's step when it started), so the lineage of a killed
    and resumed job can be rebuilt (:func:`trained_chunks`).
    """

    def __init__(self, log_dir: str, main_sleep_s: float = 0.0) -> None:
        self.log_dir = log_dir
        self.main_sleep_s = main_sleep_s  # emulated compute per step of rank 0 (a slow main learner)
        self._file: Any = None

    def before_step(self, trainer: Any, step: int) -> None:
        if self.main_sleep_s and trainer.strategy.rank == 0:
            time.sleep(self.main_sleep_s)

    def start(self, trainer: Any) -> None:
        path = Path(self.log_dir) / f"rank{trainer.strategy.rank}.log"
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the run
        self._file.write(f"start {trainer.step} {os.getpid()}\n")
        self._file.flush()

    def after_step(self, trainer: Any, x: Any, y: Any, lr: float) -> None:
        epoch = trainer.strategy.hand.work.epoch
        real = (y != IGNORE_INDEX).any(dim=1)
        lines = [f"{epoch} {trainer.step} {chunk_hash(row)}\n" for row, keep in zip(x, real, strict=True) if keep]
        self._file.write("".join(lines))
        self._file.flush()


def chunk_hash(features: Any) -> str:
    """A chunk's identity: its float16 features (as stored in the archive)."""
    import hashlib

    import numpy as np

    return hashlib.sha1(np.ascontiguousarray(features.to("cpu", torch.float16).numpy()).tobytes()).hexdigest()[:16]


def trained_chunks(log_dir: Path) -> dict[int, list[str]]:
    """Every chunk trained in the job's lineage, by epoch: a killed run's steps after the step its
    successor resumed from are dropped (their updates died with it)."""
    by_epoch: dict[int, list[str]] = {}
    for path in sorted(Path(log_dir).glob("rank*.log")):
        runs: list[tuple[int, list[tuple[int, int, str]]]] = []
        for line in path.read_text().splitlines():
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "start":
                runs.append((int(parts[1]), []))
            elif len(parts) == 3:  # a line cut by the kill has fewer parts
                runs[-1][1].append((int(parts[0]), int(parts[1]), parts[2]))
        for i, (_, steps) in enumerate(runs):
            until = runs[i + 1][0] if i + 1 < len(runs) else None
            for epoch, step, digest in steps:
                if until is None or step <= until:
                    by_epoch.setdefault(epoch, []).append(digest)
    return by_epoch


STEP = 0.05  # the straggler scenario's emulated compute per step

# SSGD: batch 12 = 3 chunks per learner, blocks of 8 chunks (3 + 3 + 2) and a shorter last
# block, so members of the one super-learner take empty steps in lockstep.
SSGD = dict(batch=12, base_batch=12, lr=0.3)
SSGD_ADAM = dict(SSGD, lr=0.01, optimizer="adam")  # the strategies never look inside the optimizer
# lr 0: weights move only by gossip. Three epochs: each ends on an agreed round that at
# least one learner began after a step, so at least three rounds happen however the
# 2 shared cores schedule the workers.
ZERO = dict(lr=0.0, momentum=0.0, epochs=3)


def mechanism_runs(train: Path, root: Path) -> list:
    """The scenarios of the mechanism tests (test_mechanism.py, and across hosts test_hosts.py)."""
    zero_hooks = Recorder(perturb=1.0, step_sleep_s=0.01)

    def c(name: str, **kw):
        return tiny_config(train, root / name, **kw)

    no_avg = {"strategy": "adpsgd", "nproc": 4, "global_average": False}
    return [
        ("ssgd", {"strategy": "ssgd", "nproc": 4}, c("ssgd", **SSGD),
         Recorder(record_weights=True, record_batches=True, step_sleep_s=0.005)),
        ("ssgd-adam", {"strategy": "ssgd", "nproc": 4}, c("ssgd-adam", **SSGD_ADAM),
         Recorder(record_weights=True, record_batches=True, step_sleep_s=0.005)),
        ("adpsgd-zero", no_avg, c("adpsgd-zero", **ZERO), zero_hooks),
        ("random-zero", {**no_avg, "topology": "random-ring", "reshuffle_every": 1, "gossip_seed": 3},
         c("random-zero", **ZERO), zero_hooks),
        # the same through the gossip process group (gloo point to point) instead of shared memory
        ("adpsgd-zero-group", {**no_avg, "gossip_transport": "group"}, c("adpsgd-zero-group", **ZERO), zero_hooks),
        ("h-adpsgd", {"strategy": "h-adpsgd", "group_size": 2, "nproc": 4}, c("h-adpsgd"),
         Recorder(record_weights=True, step_sleep_s=0.005)),
        ("h-adpsgd-group", {"strategy": "h-adpsgd", "group_size": 2, "nproc": 4, "gossip_transport": "group"},
         c("h-adpsgd-group"), Recorder(record_weights=True, step_sleep_s=0.005)),
        ("straggler", {"strategy": "adpsgd", "nproc": 4, "straggler_rank": 3, "straggler_factor": 3.0},
         c("straggler", batch=4, base_batch=4, block_chunks=4), Recorder(step_sleep_s=STEP)),
    ]


def _run_one(place: Any, store: Any, name: str, dist_fields: dict[str, Any], cfg: TrainConfig,
             hooks: Recorder) -> list[dict[str, Any]]:
    """One job on the already joined workers: fresh groups and store keys, every rank's record."""
    import torch.distributed as dist

    from asrtrain.distributed.config import DistConfig
    from asrtrain.distributed.strategy import DistributedStrategy
    from asrtrain.train.trainer import train

    strategy = DistributedStrategy(DistConfig(**dist_fields), place, dist.PrefixStore(name, store), seed=cfg.seed)
    train(cfg, strategy, hooks)  # closes the strategy
    gossip = strategy.gossiping.gossip
    rec = dict(hooks.rec, gossip_alive_after_close=gossip is not None and gossip._thread.is_alive())
    gathered: list[Any] = [None] * place.world_size
    dist.all_gather_object(gathered, rec)
    return gathered


def scenarios(runs: list[tuple[str, dict[str, Any], TrainConfig, Recorder]]) -> dict[str, Any]:
    """Worker entry (elastic launcher): each (name, DistConfig fields, TrainConfig, hooks) in turn.

    Returns, on every rank, ``name -> [record of rank 0, 1, …]``.
    """
    import torch.distributed as dist

    from asrtrain.distributed.launch import init_worker

    place, store = init_worker("gloo", 30.0)
    try:
        return {name: _run_one(place, store, name, fields, cfg, hooks) for name, fields, cfg, hooks in runs}
    finally:
        dist.destroy_process_group()


def chunks_main(argv: list[str]) -> None:
    """``jobs.py chunks TRAIN EXP LOGDIR STRATEGY NPROC [options]``: ``asrtrain train``'s own call
    (``run``) with a :class:`ChunkLog`; exits 75 when preempted, as the CLI does."""
    from asrtrain.core.errors import AsrtrainError
    from asrtrain.distributed.config import DistConfig
    from asrtrain.train.run import run

    parser = argparse.ArgumentParser()
    for name in ("train", "exp", "log_dir", "strategy"):
        parser.add_argument(name)
    parser.add_argument("nproc", type=int)
    parser.add_argument("--every", type=int, default=5, help="mid-epoch checkpoint every N steps")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=None, help="default: 2 chunks a learner")
    parser.add_argument("--valid", default=None)
    parser.add_argument("--elastic", action="store_true")
    parser.add_argument("--group-size", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=20.0, help="--timeout of asrtrain train")
    parser.add_argument("--main-sleep", type=float, default=0.0, help="seconds rank 0 sleeps before each step")
    args = parser.parse_args(argv)
    # 2 chunks a learner a step: 4 steps a block of 8, so checkpoints fall in the middle of blocks
    cfg = tiny_config(Path(args.train), Path(args.exp), epochs=args.epochs, batch=args.batch or 2 * args.nproc,
                      save_every_steps=args.every, momentum=0.9, valid=args.valid)
    dist = DistConfig(args.strategy, nproc=args.nproc, timeout_s=args.timeout, elastic=args.elastic,
                      group_size=args.group_size)
    try:
        run(cfg, dist, hooks=ChunkLog(args.log_dir, args.main_sleep))
    except AsrtrainError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None


def main(argv: list[str]) -> None:
    """Script form: every strategy of ``--strategies`` in one launch; rank 0 writes OUT.json."""
    import torch.distributed as dist

    from asrtrain.distributed.launch import init_worker

    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("train", type=Path)
    parser.add_argument("exp_root", type=Path)
    parser.add_argument("--strategies", default="ssgd,adpsgd,h-adpsgd")
    parser.add_argument("--mechanism", action="store_true", help="run mechanism_runs' scenarios instead")
    args = parser.parse_args(argv)
    place, store = init_worker("gloo", 30.0)
    result: dict[str, Any] = {"launcher": place.launcher, "world": place.world_size}
    if args.mechanism:
        for name, fields, cfg, hooks in mechanism_runs(args.train, args.exp_root):
            result[name] = _run_one(place, store, name, fields, cfg, hooks)
        if place.rank == 0:
            Path(args.out).write_text(json.dumps(result))
        dist.destroy_process_group()
        return
    for name in args.strategies.split(","):
        fields = {"strategy": name, "timeout_s": 30.0}
        if name == "h-adpsgd":
            fields["group_size"] = 2  # two "nodes" of two on one machine
        cfg = tiny_config(args.train, args.exp_root / name, batch=8)
        result[name] = _run_one(place, store, name, fields, cfg, Recorder(step_sleep_s=0.005))
    if place.rank == 0:
        Path(args.out).write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if sys.argv[1:2] == ["chunks"]:
        chunks_main(sys.argv[2:])
    else:
        main(sys.argv[1:])
