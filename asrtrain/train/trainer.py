"""The training loop: one short loop for one learner and for every distributed strategy.

Per step: logits → summed frame cross-entropy over the real (unpadded) frames →
divided by ``strategy.loss_denominator`` → backward → gradient clipping → SGD
step → ``strategy.after_step``. Per epoch: ``strategy.end_epoch`` (agree on the
end, average weights), every learner evaluates its share of the held-out set,
the figures are summed over learners with ``strategy.all_sum``, and the main
learner writes the metrics row and the checkpoint. A non-finite loss or gradient
stops the run with an error naming the step; the last complete checkpoint stays
as it was.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from asrtrain.core.errors import AsrtrainError, ConfigError, InputError
from asrtrain.core.progress import Progress
from asrtrain.model.blstm import BLSTM
from asrtrain.model.io import save_final
from asrtrain.train.checkpoint import (
    checkpoint_dir,
    clean_temporaries,
    last_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_learner_state,
    prune_checkpoints,
    save_checkpoint,
    save_learner_state,
    set_rng_state,
)
from asrtrain.train.config import TrainConfig
from asrtrain.train.metrics import MetricsLog
from asrtrain.train.schedule import LRSchedule
from asrtrain.train.strategy import Strategy

log = logging.getLogger("asrtrain.train")


class TrainingDiverged(AsrtrainError):
    """The loss or the gradient became NaN or infinite."""


@dataclass
class TrainResult:
    """What a run did: where its outputs are and its per-epoch figures."""

    exp: Path
    final_path: Path | None
    start_epoch: int
    epochs_done: int
    steps: int
    history: list[dict[str, Any]] = field(default_factory=list)


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 autocast on GPU by default; fp32 (no autocast) on CPU unless asked."""
    if precision == "bf16" or (precision == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return None


def _autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def frame_loss(logits: torch.Tensor, targets: torch.Tensor,
               ignore_index: int) -> tuple[torch.Tensor, int, int]:
    """(summed cross-entropy, real frames, correctly classified frames); padding ignored."""
    flat = logits.reshape(-1, logits.shape[-1]).float()
    y = targets.reshape(-1)
    loss_sum = F.cross_entropy(flat, y, ignore_index=ignore_index, reduction="sum")
    real = y != ignore_index
    with torch.no_grad():
        correct = int(((flat.argmax(-1) == y) & real).sum())
    return loss_sum, int(real.sum()), correct


def open_archive(path: Path, role: str) -> Any:
    from asrtrain.data.archive import Archive

    archive = Archive(path)
    if archive.num_pdfs is None:
        raise InputError(f"the {role} archive has no targets (made without --ali)", path)
    return archive


def evaluate(model: BLSTM, archive: Any, batch: int, device: torch.device,
             dtype: torch.dtype | None, rank: int = 0, world_size: int = 1) -> list[float]:
    """[summed loss, real frames, correct frames] over this learner's share of the held-out set.

    Held-out batches are dealt round-robin to the learners (batch i to learner
    i mod world), so every learner evaluates in parallel and ``all_sum`` of the
    results covers every chunk exactly once.
    """
    from asrtrain.data.loader import IGNORE_INDEX

    was_training = model.training
    model.eval()
    loss_sum, frames, correct = 0.0, 0, 0
    starts = list(range(0, archive.num_chunks, batch))[rank::world_size]
    with torch.no_grad():
        for start in starts:
            feats, targets = archive.read_chunks(start, min(start + batch, archive.num_chunks))
            x = torch.as_tensor(feats).to(device=device, dtype=torch.float32)
            y = torch.as_tensor(targets).to(device=device, dtype=torch.int64)
            y[y < 0] = IGNORE_INDEX
            with _autocast(device, dtype):
                logits = model(x)
            ls, n, c = frame_loss(logits, y, IGNORE_INDEX)
            loss_sum, frames, correct = loss_sum + float(ls), frames + n, correct + c
    model.train(was_training)
    return [loss_sum, float(frames), float(correct)]


def held_out_figures(sums: list[float]) -> dict[str, float]:
    """Loss per real frame and frame accuracy from :func:`evaluate`'s (summed) totals."""
    loss_sum, frames, correct = sums
    return {"valid_loss": loss_sum / max(frames, 1), "valid_acc": correct / max(frames, 1),
            "valid_frames": int(frames)}


class Trainer:
    """Holds the state of a run; :meth:`fit` runs the epochs that remain."""

    def __init__(self, cfg: TrainConfig, strategy: Strategy | None = None) -> None:
        from asrtrain.data.loader import IGNORE_INDEX, ChunkLoader

        self.strategy = strategy or Strategy()
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.archive = open_archive(cfg.archive, "training")
        self.cfg = cfg.with_archive_dims(self.archive.feat_dim, self.archive.num_pdfs)
        self.valid = open_archive(cfg.valid, "held-out") if cfg.valid else None
        if self.valid is not None and (self.valid.feat_dim, self.valid.num_pdfs) != (
                self.archive.feat_dim, self.archive.num_pdfs):
            raise InputError(f"held-out archive has feat_dim {self.valid.feat_dim} and "
                             f"{self.valid.num_pdfs} pdfs; the training archive has "
                             f"{self.archive.feat_dim} and {self.archive.num_pdfs}", cfg.valid)
        self.ignore_index = IGNORE_INDEX
        self.device = torch.device(self.strategy.device)
        self.dtype = autocast_dtype(self.cfg.precision, self.device)
        self.schedule = LRSchedule.from_config(self.cfg)
        torch.manual_seed(self.cfg.seed)  # identical initial weights on every learner
        self.model = BLSTM(self.cfg.model)
        self.model.set_normalization(self.archive.mean, self.archive.var)
        self.model.to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.schedule.lr(1),
                                         momentum=self.cfg.momentum, nesterov=self.cfg.nesterov,
                                         weight_decay=self.cfg.weight_decay)
        self.step, self.start_epoch = 0, 1
        self.history: list[dict[str, Any]] = []
        self.last_good: Path | None = None
        if self.cfg.resume:
            self._resume()
        elif self.strategy.is_main:
            self._forget_earlier_run()
        kwargs: dict[str, Any] = {k: v for k, v in (("block_chunks", self.cfg.block_chunks),
                                    ("prefetch", self.cfg.prefetch)) if v is not None}
        self.loader = ChunkLoader(self.cfg.archive, self.cfg.per_learner_batch(self.strategy.world_size),
                                  seed=self.cfg.seed, rank=self.strategy.rank,
                                  world_size=self.strategy.world_size, **kwargs)

    def _resume(self) -> None:
        if self.strategy.is_main:
            clean_temporaries(self.cfg.exp)
        path = last_checkpoint(self.cfg.exp)
        if path is None:
            return
        state = load_checkpoint(path, map_location=self.device)
        trainer = state["trainer"]
        saved_model = trainer.get("config", {}).get("model")
        if saved_model is not None and saved_model != self.cfg.model.to_dict():
            raise ConfigError(f"the checkpoint's model {saved_model} differs from the one asked "
                              f"for {self.cfg.model.to_dict()}; use a new EXP or --no-resume", path)
        learners = int(trainer.get("learners", trainer.get("strategy", {}).get("world_size", 1)))
        if learners != self.strategy.world_size:
            raise ConfigError(f"the checkpoint was written by {learners} learner(s) and this job has "
                              f"{self.strategy.world_size}: resume with {learners}, or start over with "
                              "--no-resume", path)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        set_rng_state(trainer["rng"])
        self.strategy.load_state_dict(trainer.get("strategy", {}))
        self.step, self.start_epoch = int(trainer["step"]), int(trainer["epoch"]) + 1
        if learners > 1:
            self._load_own_state(path, trainer)
        self.history = list(trainer.get("history", []))
        self.last_good = path
        log.info("resuming from %s (epoch %d done, step %d)", path, trainer["epoch"], self.step)

    def _load_own_state(self, path: Path, trainer: dict[str, Any]) -> None:
        """This learner's own optimizer, RNG, strategy state and step (and weights if they differ)."""
        if "learners" not in trainer:  # written before learners kept their own state
            log.warning("%s holds the main learner's optimizer state only: every learner resumes "
                        "with it", path)
            return
        own = load_learner_state(path, self.strategy.rank)
        if "model" in own:
            self.model.load_state_dict(own["model"])
        self.optimizer.load_state_dict(own["optimizer"])
        set_rng_state(own["rng"])
        self.strategy.load_state_dict(own["strategy"])
        self.step = int(own["step"])

    def learner_state(self) -> dict[str, Any]:
        """What this learner alone knows, for an exact resume (see :func:`save_learner_state`)."""
        state: dict[str, Any] = {"optimizer": self.optimizer.state_dict(), "step": self.step,
                                 "strategy": self.strategy.state_dict(),
                                 "world_size": self.strategy.world_size}
        if not self.strategy.weights_agree:
            state["model"] = self.model.state_dict()
        return state

    def _forget_earlier_run(self) -> None:
        """``--no-resume`` starts over: an earlier run's checkpoints must not be resumed later."""
        clean_temporaries(self.cfg.exp)
        old = list_checkpoints(self.cfg.exp)
        for _, path in old:
            shutil.rmtree(path)
        if old:
            log.warning("--no-resume: removed %d checkpoint(s) of an earlier run in %s", len(old),
                        checkpoint_dir(self.cfg.exp))

    def _set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def _diverged(self, what: str, value: float, epoch: int) -> TrainingDiverged:
        keep = f"last good checkpoint: {self.last_good}" if self.last_good else "no checkpoint yet"
        return TrainingDiverged(f"step {self.step} (epoch {epoch}): {what} is {value}; "
                                f"training stopped ({keep})")

    def train_step(self, net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                   epoch: int) -> tuple[float, int, int]:
        """One optimizer step; returns (summed loss, real frames, correct frames)."""
        x = x.to(self.device, non_blocking=True)
        y = y.to(self.device, non_blocking=True)
        with _autocast(self.device, self.dtype):
            logits = net(x)
        loss_sum, frames, correct = frame_loss(logits, y, self.ignore_index)
        value = float(loss_sum.detach())
        self.step += 1
        if not math.isfinite(value):
            raise self._diverged("the training loss", value, epoch)
        loss = loss_sum / self.strategy.loss_denominator(frames)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.clip > 0:
            norm = float(torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip))
            if not math.isfinite(norm):
                raise self._diverged("the gradient norm", norm, epoch)
        self.optimizer.step()
        self.strategy.after_step(self.model, self.step)
        return value, frames, correct

    def run_epoch(self, net: torch.nn.Module, epoch: int, metrics: MetricsLog | None) -> list[float]:
        """Train one epoch; returns [loss sum, real frames, correct frames, steps] of this learner."""
        per_learner = self.cfg.per_learner_batch(self.strategy.world_size)
        total_steps = math.ceil(self.archive.num_chunks / self.cfg.batch)
        if self.cfg.max_steps_per_epoch:
            total_steps = min(total_steps, self.cfg.max_steps_per_epoch)
        totals = [0.0, 0.0, 0.0, 0.0]
        # A distributed strategy serves the batches itself (work sharing, members of a
        # super-learner in lockstep); otherwise the loader's own order.
        serve = getattr(self.strategy, "batches", None)
        batches = serve(self.loader, epoch) if serve is not None else self.loader.epoch(
            epoch, blocks=self.strategy.blocks(epoch, self.loader.num_blocks))
        try:
            self._run_batches(net, epoch, batches, totals, metrics, total_steps, per_learner)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()  # stops the loader's prefetch thread at once after a break or an error
        return totals

    def _run_batches(self, net: torch.nn.Module, epoch: int, batches: Any, totals: list[float],
                     metrics: MetricsLog | None, total_steps: int, per_learner: int) -> None:
        """The inner loop: steps, a metrics row every ``log_every`` steps, the progress bar."""
        win_loss, win_frames, win_start = 0.0, 0, time.perf_counter()
        chunks, t0 = 0, time.perf_counter()
        share = self.strategy.world_size / max(self.archive.num_chunks, 1)
        show = None if self.strategy.is_main else False
        # Work sharing: steps per learner are unknown in advance; the epoch's progress is
        # the blocks handed out to all learners instead (this learner's steps beside it).
        shared = self.strategy.blocks_handed_out() is not None
        total, unit = (self.loader.num_blocks, " blocks") if shared else (total_steps, " steps")
        with Progress(f"epoch {epoch}/{self.cfg.epochs}", total=total, enabled=show, unit=unit) as bar:
            for x, y in batches:
                lr = self.schedule.lr(epoch, chunks * share)
                self._set_lr(lr)
                loss_sum, frames, correct = self.train_step(net, x, y, epoch)
                chunks += per_learner
                for i, v in enumerate((loss_sum, frames, correct, 1)):
                    totals[i] += v
                win_loss, win_frames = win_loss + loss_sum, win_frames + frames
                if self.step % self.cfg.log_every == 0:
                    now = time.perf_counter()
                    if metrics is not None:
                        metrics.write("step", step=self.step, epoch=epoch, lr=lr,
                                      loss=win_loss / max(win_frames, 1),
                                      frames_per_s=win_frames / max(now - win_start, 1e-9))
                    win_loss, win_frames, win_start = 0.0, 0, now
                rate = totals[1] / max(time.perf_counter() - t0, 1e-9)
                fields = {"step": self.step, "lr": lr, "fps": f"{rate:.0f}"}
                if frames:  # an empty step (a member waiting in lockstep) has no loss to show
                    fields["loss"] = loss_sum / frames
                if shared:
                    bar.set_done(self.strategy.blocks_handed_out() or 0, **fields)
                else:
                    bar.advance(1, **fields)
                if self.cfg.max_steps_per_epoch and totals[3] >= self.cfg.max_steps_per_epoch:
                    break
            if shared:  # the claim that found no block left came after the last step
                bar.set_done(self.strategy.blocks_handed_out() or 0)

    def fit(self) -> TrainResult:
        """Run the remaining epochs, write checkpoints and ``final.pt`` (main learner)."""
        cfg, strategy = self.cfg, self.strategy
        main = strategy.is_main
        metrics = MetricsLog(cfg.exp / "metrics.jsonl",
                             resume_epoch=self.start_epoch - 1) if main else None
        net = strategy.wrap(self.model)
        self.model.train()
        try:
            for epoch in range(self.start_epoch, cfg.epochs + 1):
                started = time.perf_counter()
                totals = self.run_epoch(net, epoch, metrics)
                strategy.end_epoch(self.model, epoch)
                if self.valid is not None:
                    totals += self._held_out()
                sums = strategy.all_sum(totals)
                loss_sum, frames, correct, steps = sums[:4]
                seconds = time.perf_counter() - started
                if strategy.world_size > 1:  # every learner's state, before the checkpoint is sealed
                    save_learner_state(cfg.exp, epoch, strategy.rank, self.learner_state())
                    strategy.barrier()
                if main:
                    row = {"epoch": epoch, "step": self.step, "lr": self.schedule.lr(epoch),
                           "train_loss": loss_sum / max(frames, 1),
                           "train_acc": correct / max(frames, 1), "train_frames": int(frames),
                           "learner_steps": int(steps), "seconds": seconds,
                           "frames_per_s": frames / max(seconds, 1e-9)}
                    if self.valid is not None:
                        row.update(self._held_out_row(sums[4:]))
                    self.history.append(row)
                    assert metrics is not None
                    metrics.write("epoch", **row)
                    log.info("%s", epoch_summary(row))
                    self.last_good = save_checkpoint(cfg.exp, epoch, self.model, self.optimizer, {
                        "step": self.step, "config": cfg.to_dict(), "history": self.history,
                        "strategy": strategy.state_dict()}, learners=strategy.world_size)
                    prune_checkpoints(cfg.exp, cfg.keep_checkpoints)
                strategy.barrier()
            final = self._write_final() if main else None
        finally:
            if metrics is not None:
                metrics.close()
        return TrainResult(exp=cfg.exp, final_path=final, start_epoch=self.start_epoch,
                           epochs_done=cfg.epochs, steps=self.step, history=list(self.history))

    def _held_out(self) -> list[float]:
        """This learner's part of the held-out figures, to be summed over all learners.

        Learners with equal weights split the held-out set. Learners that keep their
        own weights (no global average) each evaluate all of it, in slot ``rank``: the
        figure reported is then the main learner's, whose weights are the ones saved,
        with every learner's beside it.
        """
        s = self.strategy
        if s.weights_agree:
            return evaluate(self.model, self.valid, self.cfg.valid_batch, self.device, self.dtype,
                            s.rank, s.world_size)
        slots = [0.0] * (3 * s.world_size)
        slots[3 * s.rank:3 * s.rank + 3] = evaluate(self.model, self.valid, self.cfg.valid_batch,
                                                    self.device, self.dtype)
        return slots

    def _held_out_row(self, sums: list[float]) -> dict[str, Any]:
        """The epoch row's held-out figures from the summed :meth:`_held_out` values."""
        if len(sums) == 3:
            return held_out_figures(sums)
        learners = [held_out_figures(sums[i:i + 3]) for i in range(0, len(sums), 3)]
        return {**learners[0], "valid_loss_by_learner": [round(f["valid_loss"], 5) for f in learners]}

    def _write_final(self) -> Path:
        meta = {"train_config": self.cfg.to_dict(), "epochs": self.cfg.epochs, "steps": self.step,
                "history": self.history, "archive_header": _plain(self.archive.header),
                "tree_id": self.archive.header.get("tree_id")}
        path = save_final(self.cfg.exp / "final.pt", self.model, self.archive.priors,
                          self.archive.layout, meta)
        log.info("final model written to %s", path)
        return path


def epoch_summary(row: dict[str, Any]) -> str:
    """One readable log line for an epoch row."""
    text = (f"epoch {row['epoch']}: train loss {row['train_loss']:.4f} acc {100 * row['train_acc']:.1f}%")
    if "valid_loss" in row:
        text += f" | held-out loss {row['valid_loss']:.4f} acc {100 * row['valid_acc']:.1f}%"
    if "valid_loss_by_learner" in row:
        by = row["valid_loss_by_learner"]
        text += f" (learners {min(by):.4f}-{max(by):.4f})"
    return (text + f" | lr {row['lr']:.4g} | {row['frames_per_s']:,.0f} frames/s | "
            f"{row['seconds']:.1f} s, step {row['step']}")


def _plain(value: Any) -> Any:
    """Header values as plain Python (numpy scalars/arrays to lists) for a weights-only file."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def train(cfg: TrainConfig, strategy: Strategy | None = None) -> TrainResult:
    """Train as ``cfg`` says with ``strategy`` (default: one learner); closes the strategy."""
    strategy = strategy or Strategy()
    try:
        return Trainer(cfg, strategy).fit()
    finally:
        strategy.close()


def plan(cfg: TrainConfig) -> dict[str, Any]:
    """What a single-learner run would do (``--dry-run``), without training."""
    archive = open_archive(cfg.archive, "training")
    resolved = cfg.with_archive_dims(archive.feat_dim, archive.num_pdfs)
    schedule = LRSchedule.from_config(resolved)
    m = resolved.model
    resume = last_checkpoint(cfg.exp) if cfg.resume else None
    return {
        "strategy": "single", "archive": str(cfg.archive), "chunks": archive.num_chunks,
        "frames": sum(u[3] for u in archive.utterances), "valid": str(cfg.valid),
        "model": f"{m.layers}x{m.hidden} BLSTM, proj {m.proj}, {m.input_dim} -> {m.num_pdfs}",
        "parameters": m.num_parameters(), "GFLOP/frame (train)": round(m.train_flops_per_frame() / 1e9, 4),
        "batch (chunks)": cfg.batch, "steps/epoch": math.ceil(archive.num_chunks / cfg.batch),
        "epochs": cfg.epochs, "peak lr": schedule.peak_lr,
        "lr by epoch": ", ".join(f"{v:.4g}" for v in schedule.table(cfg.epochs)),
        "resume from": str(resume) if resume else "none",
    }
