"""``asrtrain train`` as a library call: launch or join the job, then run the loop on every learner.

:func:`run` is the one path from the command line to :class:`~asrtrain.train.trainer.Trainer`
for every strategy, the single learner included: the parallel layer
(:func:`asrtrain.distributed.entry.run_job`) starts or joins the learners and hands
each its strategy; :func:`learner` runs the loop with it. :func:`plan` is the one
dry-run plan: the trainer's part (data, model, schedule, resume) and the parallel
layer's (learners, super-learners, ring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asrtrain.data.streams import select_streams
from asrtrain.distributed.base import Strategy
from asrtrain.distributed.config import DistConfig
from asrtrain.distributed.entry import layout_plan, run_job
from asrtrain.distributed.logs import parent_spec
from asrtrain.train.augment import spec_masker
from asrtrain.train.config import TrainConfig
from asrtrain.train.hooks import Hooks
from asrtrain.train.optim import ADAM_BETA2
from asrtrain.train.plateau import Plateau
from asrtrain.train.resume import describe
from asrtrain.train.schedule import LRSchedule
from asrtrain.train.trainer import TrainResult, train
from asrtrain.train.validate import archive_dims, batch_problem, open_archive, open_held_out


def learner(strategy: Strategy, cfg: TrainConfig, hooks: Hooks | None = None) -> TrainResult:
    """One learner's part of the job (module level: it crosses to spawned workers)."""
    return train(cfg, strategy, hooks)


def run(cfg: TrainConfig, dist_cfg: DistConfig, main_log: Path | None = None,
        hooks: Hooks | None = None) -> TrainResult | None:
    """Train ``cfg`` with ``dist_cfg``'s strategy on every learner; returns rank 0's result.

    Learners of a distributed job log to ``EXP/log/train.rank<R>.log``; rank 0 also to
    the console and to ``main_log`` (the command's run log).
    """
    logs = parent_spec(Path(cfg.exp) / "log", main_log) if dist_cfg.distributed else None
    return run_job(learner, dist_cfg, cfg, hooks, seed=cfg.seed, logs=logs)


def _optimizer(cfg: TrainConfig) -> str:
    """The optimizer row of the plan: which one, with what momentum (beta1) and decay."""
    if cfg.optimizer == "adam":
        return f"adam (AdamW, betas {cfg.momentum:g}/{ADAM_BETA2:g}, weight decay {cfg.weight_decay:g})"
    return (f"sgd (momentum {cfg.momentum:g}{', Nesterov' if cfg.nesterov else ''}, "
            f"weight decay {cfg.weight_decay:g})")


def _save_policy(cfg: TrainConfig) -> str:
    every = [f"{cfg.save_every_minutes:g} min" if cfg.save_every_minutes else "",
             f"{cfg.save_every_steps} steps" if cfg.save_every_steps else ""]
    every = [e for e in every if e]
    return ("every " + " or ".join(every) if every else "none") + "; on SIGTERM/SIGUSR1 one, then exit 75"


def _rates(cfg: TrainConfig) -> str:
    """The rate by epoch (paper), or the warm-up's rates and the plateau rule."""
    schedule = LRSchedule.from_config(cfg)
    if cfg.lr_schedule == "paper":
        return ", ".join(f"{v:.4g}" for v in schedule.table(cfg.epochs))
    warm = schedule.table(min(cfg.warmup_epochs, cfg.epochs)) if cfg.warmup_epochs > 1 else []
    head = f"warm-up {', '.join(f'{v:.4g}' for v in warm)}; then " if warm else ""
    return head + Plateau.from_config(cfg).describe()


def _steps(cfg: TrainConfig, chunks: int, world: int, size: int) -> dict[str, Any]:
    """Steps per epoch and the last one's batch: exact for one learner and SSGD (a step is ``--batch``
    chunks, over block boundaries); with several learners each one's own last step may be short."""
    steps, last = cfg.epoch_steps(chunks)
    note = ""
    if world > 1:
        note = ("; each learner's last step may be short too: one step more where their shares end unevenly"
                if size == world else f"; about: {world // size} super-learners share the blocks as fast as each goes")
    return {"steps/epoch": steps,
            "last step (chunks)": f"{last}" + (" (the epoch's remainder)" if last < cfg.batch else "") + note}


_SELECT = {"last": "the last epoch's model", "best": "the epoch with the lowest held-out loss",
           "average": "the mean of the last {n} epoch checkpoints' weights"}


def plan(cfg: TrainConfig, dist_cfg: DistConfig) -> dict[str, Any]:
    """What ``run`` would do, without starting anything (``asrtrain train --dry-run``)."""
    archive = open_archive(cfg.archive, "training")
    chosen = select_streams(archive, cfg.stream_names)
    resolved = cfg.with_archive_dims(chosen.dim, archive_dims(archive)[1])
    open_held_out(cfg.valid, archive, chosen)  # the trainer's refusals: width, pdfs, tree
    spec = cfg.augment
    if spec is not None:  # the same refusals as the trainer's
        spec_masker(spec, archive.layout, chosen.columns, archive.chunk, cfg.seed, 0, archive.path)
    m = resolved.model
    out: dict[str, Any] = {
        "archive": str(cfg.archive), "chunks": archive.num_chunks,
        "frames": sum(u[3] for u in archive.utterances), "valid": str(cfg.valid),
        "input (--streams)": chosen.describe(),
        "spec-augment": "off" if spec is None else f"{spec} per chunk, training batches only",
        "model": f"{m.layers}x{m.hidden} BLSTM, proj {m.proj}, {m.input_dim} -> {m.num_pdfs}",
        "parameters": m.num_parameters(), "GFLOP/frame (train)": round(m.train_flops_per_frame() / 1e9, 4),
    }
    layout = layout_plan(dist_cfg)
    world, size = layout["learners"], layout["super_learner_size"]
    per = cfg.per_learner_batch(world)
    schedule = LRSchedule.from_config(resolved)
    out.update(layout)
    out.update({
        "batch (chunks)": cfg.batch, "batch_per_learner": per, "effective_batch": per * world,
        "super_learner_batch": per * size, **_steps(cfg, archive.num_chunks, world, size),
        "epochs": cfg.epochs, "optimizer": _optimizer(cfg), "peak lr": schedule.peak_lr,
        "lr schedule": cfg.lr_schedule,
        "lr by epoch": _rates(resolved),
        "final model (--select)": f"{cfg.selection}: {_SELECT[cfg.selection.rule].format(n=cfg.selection.n)}",
        "resume from": describe(cfg.exp, world, dist_cfg.strategy, size) if cfg.resume else "no (--no-resume)",
        "mid-epoch checkpoints": _save_policy(cfg),
    })
    problem = batch_problem(archive, cfg.batch)
    if problem:
        out["problem"] = f"{cfg.archive}: {problem}; training would stop here"
    return out
