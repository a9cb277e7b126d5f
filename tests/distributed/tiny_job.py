"""A tiny training job for the distributed tests: a linear model, hand-made data, the real strategy.

Runs as a module function (``job`` under ``--nproc``/the test harness) or as a script
(``python tests/distributed/tiny_job.py OUT.json --strategy adpsgd`` under torchrun or
mpiexec). Each rank writes what it saw to ``OUT.rank<r>.json`` (or returns it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

IGNORE = -100


@dataclass
class JobSpec:
    """Sizes of the tiny job (small enough for seconds on 2 shared cores)."""

    num_blocks: int = 7
    batches_per_block: int = 3
    last_block_batches: int = 2
    batch: int = 3
    chunk: int = 5
    dim: int = 6
    classes: int = 4
    lr: float = 0.1
    momentum: float = 0.5
    clip: float = 5.0
    epochs: int = 1
    step_sleep_s: float = 0.0
    perturb: float = 0.0
    record_weights: bool = False
    record_batches: bool = False
    die_rank: int | None = None
    die_step: int = 2
    hang: bool = False
    strategies: list[str] = field(default_factory=list)


class TinyLoader:
    """Blocks of batches generated from (block, batch) alone, with padded frames."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.num_blocks = spec.num_blocks

    def batch(self, block: int, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.spec
        g = torch.Generator().manual_seed(1000 * block + i)
        x = torch.randn(s.batch, s.chunk, s.dim, generator=g)
        y = torch.randint(0, s.classes, (s.batch, s.chunk), generator=g)
        pad = torch.randint(0, s.chunk, (s.batch,), generator=g)
        for b in range(s.batch):
            y[b, s.chunk - int(pad[b]):] = IGNORE
        return x, y

    def epoch(self, epoch: int, blocks: Any = None):
        for block in blocks:
            n = self.spec.last_block_batches if block == self.num_blocks - 1 else self.spec.batches_per_block
            for i in range(n):
                yield self.batch(block, i)


def make_model(spec: JobSpec) -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(spec.dim, spec.classes)


def flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def train_loop(strategy: Any, spec: JobSpec) -> dict[str, Any]:
    """The trainer's loop in miniature (contract 5), recording what the tests check."""
    model = make_model(spec)
    net = strategy.wrap(model)
    if spec.perturb:
        with torch.no_grad():
            g = torch.Generator().manual_seed(strategy.rank + 1)
            for p in model.parameters():
                p.add_(spec.perturb * torch.randn(p.shape, generator=g))
    opt = torch.optim.SGD(model.parameters(), lr=spec.lr, momentum=spec.momentum)
    loader = TinyLoader(spec)
    rec: dict[str, Any] = {"rank": strategy.rank, "weights": [], "batches": [], "step_times": [], "iter_times": [],
                           "initial": flat(model).tolist(), "epochs": []}
    step = 0
    last = None
    for epoch in range(spec.epochs):
        for x, y in strategy.batches(loader, epoch):
            t0 = time.perf_counter()
            if last is not None:
                rec["iter_times"].append(t0 - last)
            last = t0
            if spec.die_rank == strategy.rank and step == spec.die_step:
                if spec.hang:
                    time.sleep(3600)
                os._exit(3)
            logits = net(x)
            loss_sum = nn.functional.cross_entropy(logits.reshape(-1, spec.classes), y.reshape(-1),
                                                   ignore_index=IGNORE, reduction="sum")
            n = int((y != IGNORE).sum())
            loss = loss_sum / strategy.loss_denominator(n)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), spec.clip)
            opt.step()
            if spec.step_sleep_s:
                time.sleep(spec.step_sleep_s)
            rec["step_times"].append(time.perf_counter() - t0)
            strategy.after_step(model, step)
            step += 1
            if spec.record_batches:
                rec["batches"].append([x.tolist(), y.tolist()] if n else None)
            if spec.record_weights:
                rec["weights"].append(flat(model).tolist())
        strategy.end_epoch(model, epoch)
        rec["epochs"].append(dict(strategy.stats))
    rec["final"] = flat(model).tolist()
    rec["steps"] = step
    return rec


def scenarios(runs: list[tuple[str, dict[str, Any], JobSpec]]) -> dict[str, Any]:
    """Worker entry (under the elastic launcher): run each (name, DistConfig fields, spec) in turn.

    One set of processes serves several tests (starting 4 workers costs ~10 s here).
    Returns, on every rank, ``name -> [record of rank 0, 1, …]``.
    """
    import torch.distributed as dist

    from asrtrain.distributed.config import DistConfig
    from asrtrain.distributed.launch import init_worker
    from asrtrain.distributed.strategy import DistributedStrategy

    place, store = init_worker("gloo", 30.0)
    out: dict[str, Any] = {}
    try:
        for name, fields, spec in runs:
            strategy = DistributedStrategy(DistConfig(**fields), place, dist.PrefixStore(name, store))
            try:
                rec = train_loop(strategy, spec)
            finally:
                strategy.close()
            rec["gossip_alive_after_close"] = strategy.gossip is not None and strategy.gossip._thread.is_alive()
            gathered: list[Any] = [None] * place.world_size
            dist.all_gather_object(gathered, rec)
            out[name] = gathered
    finally:
        dist.destroy_process_group()
    return out


def job(strategy: Any, spec: JobSpec) -> dict[str, Any]:
    """Entry for :func:`asrtrain.distributed.entry.run_job`: returns rank 0's record plus all ranks'."""
    import torch.distributed as dist

    rec = train_loop(strategy, spec)
    gathered: list[Any] = [None] * strategy.world_size
    dist.all_gather_object(gathered, rec)
    return {"ranks": gathered, "threads_alive": _gossip_alive(strategy)}


def _gossip_alive(strategy: Any) -> bool:
    return strategy.gossip is not None and strategy.gossip._thread.is_alive()


def multi_job(spec: JobSpec, out: str) -> None:
    """One worker running each strategy of ``spec.strategies`` in turn (launcher tests)."""
    import torch.distributed as dist

    from asrtrain.distributed.config import DistConfig
    from asrtrain.distributed.launch import init_worker
    from asrtrain.distributed.strategy import DistributedStrategy

    place, store = init_worker("gloo", 30.0)
    result: dict[str, Any] = {"launcher": place.launcher, "world": place.world_size}
    for name in spec.strategies:
        # Store keys (work counters, rounds) are per job: each strategy gets its own prefix.
        group = 2 if name == "h-adpsgd" else None  # two "nodes" of two on one machine
        strategy = DistributedStrategy(DistConfig(name, group, timeout_s=30.0), place,
                                       dist.PrefixStore(name, store))
        try:
            rec = train_loop(strategy, spec)
        finally:
            strategy.close()
        gathered: list[Any] = [None] * place.world_size
        dist.all_gather_object(gathered, {"final": rec["final"], "steps": rec["steps"],
                                          "group_size": strategy.layout.group_size})
        result[name] = gathered
    if place.rank == 0:
        Path(out).write_text(json.dumps(result))
    dist.destroy_process_group()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--strategies", default="ssgd,adpsgd,h-adpsgd")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    multi_job(JobSpec(strategies=args.strategies.split(","), step_sleep_s=0.005), args.out)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    main(sys.argv[1:])
