"""The training loop: one loop for the single learner and for SSGD, ADPSGD and H-ADPSGD.

Read :meth:`Trainer.fit` top to bottom. An epoch: batches from the strategy (the
archive's ``--streams`` columns) → one step each (``--spec-augment``'s masks,
:mod:`asrtrain.train.augment` → logits → summed frame cross-entropy over the real
frames → divided by the strategy's denominator → backward → clipping → SGD → the
strategy's after-step), pausing at a step boundary for a mid-epoch checkpoint when one is due → the
strategy's end of epoch (agree on the end, average weights) → held-out evaluation
(:mod:`asrtrain.train.validate`) → the rate's decision for the next epoch under
``--lr-schedule plateau`` (:mod:`asrtrain.train.plateau`; it may end training) → the
epoch row (:mod:`asrtrain.train.metrics`) → the checkpoint
(:mod:`asrtrain.train.checkpoint`, keeping those ``--select`` may still pick). At the
end the main learner writes ``final.pt`` from the model ``--select`` picks
(:mod:`asrtrain.train.select`). The strategy is the only thing that differs between
one learner and many; the loop never asks which it has.

The step never waits for the device: its figures stay there (:mod:`asrtrain.train.device`)
and are read every ``log_every`` steps and at the epoch's end. A non-finite loss or
gradient then stops the run with an error naming the first step where it happened;
the last complete checkpoint stays as it was. A preemption (SIGTERM, SIGUSR1) makes
every learner finish its step, checkpoint, and stop with :class:`Preempted`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import AsrtrainError, Preempted
from asrtrain.data.archive import Archive
from asrtrain.data.context import with_context
from asrtrain.data.loader import ChunkLoader
from asrtrain.data.streams import InputSelection, select_streams
from asrtrain.distributed.base import Strategy
from asrtrain.model.blstm import BLSTM
from asrtrain.model.io import save_final
from asrtrain.train import checkpoint, graph_step, learner_figures
from asrtrain.train.augment import SpecMasker, spec_masker
from asrtrain.train.config import TrainConfig
from asrtrain.train.device import DeviceBatch, StepFigures, ahead
from asrtrain.train.events import open_sink
from asrtrain.train.graph_step import CapturedStep, Outputs
from asrtrain.train.hooks import Hooks
from asrtrain.train.metrics import EpochBar, MetricsLog, StepWindow, epoch_row, epoch_summary
from asrtrain.train.optim import make_optimizer
from asrtrain.train.plateau import Plateau, PlateauState
from asrtrain.train.priors import describe_shift, mean_posterior
from asrtrain.train.resume import restore
from asrtrain.train.schedule import LRSchedule
from asrtrain.train.select import Pick, needed_epochs, pick, selected_state
from asrtrain.train.step import autocast, autocast_dtype, frame_loss
from asrtrain.train.validate import (
    archive_dims,
    check_batch,
    held_out,
    held_out_row,
    main_value,
    open_archive,
    open_held_out,
)

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


class Trainer:
    """The state of one learner's run; :meth:`fit` runs the epochs that remain."""

    def __init__(self, cfg: TrainConfig, strategy: Strategy | None = None) -> None:
        self.strategy = strategy or Strategy()
        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        self.archive = open_archive(cfg.archive, "training")
        check_batch(self.archive, cfg.batch)
        self.input = select_streams(self.archive, cfg.stream_names)  # the columns the model reads
        self.cfg = cfg.with_archive_dims(self.input.dim, archive_dims(self.archive)[1])
        held = open_held_out(cfg.valid, self.archive, self.input)
        self.valid: Archive | None = with_context(held[0], cfg.context) if held else None
        self.valid_input: InputSelection | None = held[1] if held else None  # the same streams in it
        self.device = torch.device(self.strategy.device)
        self.dtype = autocast_dtype(self.cfg.precision, self.device)
        self.schedule = LRSchedule.from_config(self.cfg)
        self.plateau = Plateau.from_config(self.cfg) if self.cfg.lr_schedule == "plateau" else None
        self.plateau_state = PlateauState()
        self.selection = self.cfg.selection
        self.saves = checkpoint.SaveClock(self.cfg.save_every_minutes, self.cfg.save_every_steps)
        self._called_off = 0  # the epoch whose mid-epoch checkpoint was called off (no new ones in it)
        torch.manual_seed(self.cfg.seed)  # identical initial weights on every learner
        self.model = BLSTM(self.cfg.model)
        self.model.set_normalization(self.input.take(self.archive.mean), self.input.take(self.archive.var))
        self.model.to(self.device)
        self.optimizer = make_optimizer(self.cfg.optimizer, self.model.parameters(), self.schedule.lr(1),
                                        self.cfg.momentum, self.cfg.nesterov, self.cfg.weight_decay,
                                        self.device)
        self.figures = StepFigures(self.device)
        self.captured: CapturedStep | None = None  # the CUDA-graph step, made by fit()
        self.masker = self._masker()
        loader_opts: dict[str, Any] = {k: v for k, v in (("block_chunks", self.cfg.block_chunks),
                                                         ("prefetch", self.cfg.prefetch)) if v is not None}
        self.loader = ChunkLoader(self.cfg.archive, self.cfg.per_learner_batch(self.strategy.world_size),
                                  seed=self.cfg.seed, columns=self.input.index, context=self.cfg.context,
                                  **loader_opts)
        self.step, self.start_epoch = 0, 1
        self.history: list[dict[str, Any]] = []
        self.last_good: Path | None = None
        self._resumed_totals: list[float] | None = None  # a mid-epoch checkpoint's running totals
        self.metrics: MetricsLog | None = None  # the main learner's metrics.jsonl
        self._restore()

    def _restore(self) -> None:
        """Continue from the newest checkpoint (``resume``), or clear an earlier run's."""
        if not self.cfg.resume:
            if self.strategy.is_main:
                checkpoint.forget_earlier_run(self.cfg.exp)
            return
        done = restore(self.cfg.exp, self.model, self.optimizer, self.strategy, self.cfg.model.to_dict(),
                       self.device, archive=self.archive.identity, chosen=self.input, generators=self.generators)
        if done is not None:
            self.step, self.start_epoch = done.step, done.epochs_done + 1
            self.history, self.last_good, self._resumed_totals = done.history, done.path, done.totals
            self.plateau_state = self._restored_plateau(done.lr_state)

    def _masker(self) -> SpecMasker | None:
        """SpecAugment's masker of this learner's training batches (``--spec-augment``), or None."""
        spec = self.cfg.augment
        if spec is None:
            return None
        return spec_masker(spec, self.archive.layout, self.input.columns, self.archive.chunk, self.cfg.seed,
                           self.strategy.rank, self.archive.path)

    @property
    def generators(self) -> dict[str, torch.Generator]:
        """The learner's own random generators, checkpointed with its RNG states."""
        return {} if self.masker is None else {"spec_augment": self.masker.generator}

    def _restored_plateau(self, saved: dict[str, Any] | None) -> PlateauState:
        """The plateau decisions taken so far: as the checkpoint recorded them, else replayed from
        the held-out losses of its history (a checkpoint of a run under the paper's schedule)."""
        if self.plateau is None:
            return PlateauState()
        if saved is not None:
            return PlateauState.from_dict(saved)
        return self.plateau.replay(row.get("valid_loss") for row in self.history)

    def lr(self, epoch: int, fraction: float = 0.0) -> float:
        """The rate of ``epoch`` after ``fraction`` of it: the paper's, or the plateau schedule's so far."""
        if self.plateau is None:
            return self.schedule.lr(epoch, fraction)
        return self.plateau.lr(epoch, fraction, self.plateau_state)

    # ----- the loop ------------------------------------------------------------------------
    def fit(self, hooks: Hooks[Trainer] | None = None) -> TrainResult:
        """Run the remaining epochs; the main learner writes metrics, checkpoints and ``final.pt``."""
        cfg, strategy, hooks = self.cfg, self.strategy, hooks or Hooks[Trainer]()
        self.metrics = self._metrics_log(self.start_epoch - 1, self.step) if strategy.is_main else None
        net = strategy.wrap(self.model)
        self.captured = self._captured_step(net)
        self.model.train()
        hooks.start(self)
        try:
            for epoch in range(self.start_epoch, cfg.epochs + 1):
                if self.plateau_state.stop:
                    break  # a resumed run that the plateau schedule had already ended
                *totals, seconds = self.train_epoch(net, epoch, hooks)
                work_done = time.perf_counter()
                strategy.end_epoch(self.model, epoch)
                own = learner_figures.slots(strategy, time.perf_counter() - work_done)
                if self.valid is not None:
                    totals += held_out(self.model, self.valid, strategy, cfg.valid_batch, self.device, self.dtype,
                                       self.valid_input.index if self.valid_input is not None else None)
                sums = strategy.all_sum(totals + own)
                sums, by_learner = sums[:len(totals)], sums[len(totals):]
                row = epoch_row(epoch, self.step, self.lr(epoch), sums[:4], seconds)
                row.update(learner_figures.row(strategy, by_learner))
                if self.valid is not None:
                    row.update(held_out_row(sums[4:]))
                    row["valid_loss"] = main_value(strategy, row["valid_loss"])
                self.decide_rate(epoch, row)
                self.end_epoch(epoch, row, stop_after=epoch < cfg.epochs and not self.plateau_state.stop)
                hooks.end_epoch(self, row)
            final = self._write_final() if strategy.is_main else None
        finally:
            if self.metrics is not None:
                self.metrics.close()
        return TrainResult(exp=cfg.exp, final_path=final, start_epoch=self.start_epoch,
                           epochs_done=self.epochs_done, steps=self.step, history=list(self.history))

    @property
    def epochs_done(self) -> int:
        """Epochs trained so far (fewer than asked for when the plateau schedule stopped early)."""
        return int(self.history[-1]["epoch"]) if self.history else self.start_epoch - 1

    def decide_rate(self, epoch: int, row: dict[str, Any]) -> None:
        """Plateau schedule: fold the epoch's held-out loss into the decisions; the row says what they are."""
        if self.plateau is None:
            return
        self.plateau_state = state = self.plateau.advance(self.plateau_state, epoch, row.get("valid_loss"))
        row.update(lr_decision=state.decision, lr_halvings=state.halvings)
        if state.stop:
            log.info("epoch %d: held-out loss %.4f did not improve after %d halving(s) of the rate: "
                     "training ends here (--plateau-stop %s)", epoch, row["valid_loss"], state.halvings,
                     self.cfg.plateau_stop)
        elif epoch < self.cfg.epochs:
            row["lr_next"] = self.lr(epoch + 1)
            log.info("epoch %d: held-out loss %.4f (best %.4f): %s, rate for epoch %d: %.4g",
                     epoch, row["valid_loss"], state.best if state.best is not None else math.nan,
                     state.decision, epoch + 1, row["lr_next"])

    def train_epoch(self, net: torch.nn.Module, epoch: int, hooks: Hooks[Trainer]) -> list[float]:
        """Every batch the strategy serves this learner; returns [loss, frames, correct, steps, seconds]."""
        totals, self._resumed_totals = self._resumed_totals or [0.0] * 5, None
        window, started, shown = StepWindow(), time.perf_counter() - totals[4], 0.0
        steps, _ = self.cfg.epoch_steps(self.archive.num_chunks)
        with EpochBar(self.strategy, epoch, self.cfg.epochs, min(steps, self.cfg.max_steps_per_epoch or steps),
                      self.loader.num_blocks) as bar:
            while True:  # until the epoch's work is done; a pause for a checkpoint goes round again
                paused = False
                with contextlib.closing(self.strategy.batches(self.loader, epoch)) as batches:
                    for batch in ahead(batches, self.device):
                        lr = self.lr(epoch, totals[3] * self.cfg.batch / max(self.archive.num_chunks, 1))
                        hooks.before_step(self, self.step + 1)
                        self.train_step(net, batch, lr)
                        hooks.after_step(self, batch.x, batch.y, lr)
                        totals[3] += 1
                        if self.step % self.cfg.log_every == 0:
                            shown = self._read_figures(epoch, totals, window)
                            if self.metrics is not None:
                                self.metrics.write("step", **window.row(self.step, epoch, lr))
                        bar.show(self.step, lr, shown, totals[1] + self.figures.frames, time.perf_counter() - started)
                        due = self.strategy.is_main and self.saves.due(self.step) and self._called_off != epoch
                        if self.strategy.pause_wanted(due):
                            paused = True
                            break
                        if self.cfg.max_steps_per_epoch and totals[3] >= self.cfg.max_steps_per_epoch:
                            break
                self._read_figures(epoch, totals, window)
                totals[4] = time.perf_counter() - started
                if not paused:
                    break
                self.checkpoint_mid_epoch(epoch, totals)
            bar.show(self.step)  # the claim that found no block left came after the last step
        return totals

    def train_step(self, net: torch.nn.Module, batch: DeviceBatch, lr: float) -> None:
        """One optimizer step at rate ``lr``, with no host sync (figures go to :attr:`figures`).
        With ``--spec-augment`` the batch is masked first (``batch.x`` becomes what the model saw)."""
        if self.masker is not None:
            batch.x = self.masker(batch.x)
        for group in self.optimizer.param_groups:  # the eager step's rate, and what checkpoints read
            group["lr"] = lr
        denominator = self.strategy.loss_denominator(batch.frames)
        out = self.captured(batch.x, batch.y, lr, denominator) if self.captured is not None else None
        if out is None:
            out = self._step_math(net, batch.x, batch.y, denominator, True)
        loss_sum, correct, norm = out
        self.step += 1
        self.figures.add(self.step, loss_sum, correct, norm, batch.frames)
        self.strategy.after_step(self.model, self.step)

    def _step_math(self, net: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, denominator: Any,
                   cache: bool) -> Outputs:
        """Forward, loss, backward, clipping and the optimizer: the step eager or captured runs.
        ``cache=False`` inside a capture (autocast's weight-cast cache cannot outlive it)."""
        with autocast(self.device, self.dtype, cache=cache):
            logits = net(x)
        loss_sum, _, correct = frame_loss(logits, y, self.cfg.label_smoothing)
        self.optimizer.zero_grad(set_to_none=True)
        (loss_sum / denominator).backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip) if self.cfg.clip > 0 else None
        self.optimizer.step()
        return loss_sum, correct, norm

    def _captured_step(self, net: torch.nn.Module) -> CapturedStep | None:
        """The CUDA-graph step when ``--cuda-graph`` and this learner's step allows it."""
        if not self.cfg.cuda_graph:
            return None
        reason = graph_step.why_not(self.device, net is self.model, self.masker is not None,
                                    self.cfg.model.dropout)
        if reason:
            if self.device.type == "cuda":
                log.info("training step not captured as a CUDA graph: %s", reason)
            return None
        return CapturedStep(lambda x, y, d, cache: self._step_math(net, x, y, d, cache), self.optimizer, self.device,
                            rows=self.cfg.per_learner_batch(self.strategy.world_size))

    def _read_figures(self, epoch: int, totals: list[float], window: StepWindow) -> float:
        """Read the device figures (one sync), stop on a non-finite step; returns the loss per frame."""
        loss_sum, frames, correct, bad_loss, bad_grad = self.figures.read()
        if bad_loss or bad_grad:
            what, step = ("the training loss", bad_loss) if bad_loss else ("the gradient norm", bad_grad)
            keep = f"last good checkpoint: {self.last_good}" if self.last_good else "no checkpoint yet"
            raise TrainingDiverged(f"step {step} (epoch {epoch}): {what} is not finite; training stopped ({keep})")
        for i, v in enumerate((loss_sum, frames, correct)):
            totals[i] += v
        window.add(loss_sum, frames)
        return loss_sum / max(frames, 1)

    # ----- checkpoints ---------------------------------------------------------------------
    def checkpoint_mid_epoch(self, epoch: int, totals: list[float]) -> None:
        """Every learner paused at a step boundary: write the checkpoint; stop if preempted."""
        main_step = self.strategy.pause(self.model, self.step)
        if main_step is None:  # a learner reached the end of the epoch, whose checkpoint comes next:
            self._called_off = epoch  # asking again would only be called off again, step after step
            self.saves.reset(self.step)
            return
        name = checkpoint.checkpoint_name(epoch - 1, main_step)
        own = {"work": self.strategy.work_state(), "epoch_totals": list(totals)}
        self._save(name, {"epoch": epoch - 1, "mid_epoch": epoch}, own, stop_after=True)

    def end_epoch(self, epoch: int, row: dict[str, Any], stop_after: bool) -> None:
        """The epoch row (and what happened to the job) in the metrics and the log, then the checkpoint."""
        self.history.append(row)  # on every learner: whoever is main later has it all
        if self.strategy.is_main:
            if self.metrics is None:  # main since the main learner left the job: go on with its rows
                self.metrics = self._metrics_log(epoch, None)
            for event in self.strategy.events():
                self.metrics.write("event", **{"epoch": epoch, **event})
            self.metrics.write("epoch", **row)
            log.info("%s", epoch_summary(row))
        self._save(checkpoint.checkpoint_name(epoch), {"epoch": epoch}, {}, stop_after)

    def _metrics_log(self, epochs_done: int, step: int | None) -> MetricsLog:
        """``metrics.jsonl`` kept to ``epochs_done`` and ``step`` (the rows after them go), and
        its TensorBoard events purged after ``step`` alike (``None``: a learner that became main
        mid-job, whose own step does not number the rows: every row of the done epochs stays)."""
        events = open_sink(self.cfg.exp, self.cfg.tensorboard, resume_step=step)
        return MetricsLog(self.cfg.exp / "metrics.jsonl", resume_epoch=epochs_done, resume_step=step,
                          events=events)

    def _save(self, name: str, where: dict[str, Any], own: dict[str, Any], stop_after: bool) -> None:
        state = {"step": self.step, "config": self.cfg.to_dict(), "history": self.history,
                 "archive": self.archive.identity, "input": self.input.to_dict(),
                 "lr_state": self.plateau_state.to_dict() if self.plateau else None, **where}
        path, stop = checkpoint.save(self.cfg.exp, name, self.model, self.optimizer, self.strategy, state, own,
                                     keep=self.cfg.keep_checkpoints,
                                     protect=frozenset(needed_epochs(self.selection, self.history)),
                                     generators=self.generators)
        self.last_good = path or self.last_good
        self.saves.reset(self.step)
        if stop and stop_after:
            raise Preempted(f"stopped at step {self.step} after the checkpoint {self.cfg.exp}/checkpoints/{name}: "
                            "run the same command again to go on")

    # ----- around the loop -----------------------------------------------------------------
    def _write_final(self) -> Path:
        """``final.pt`` from the model ``--select`` picks, and the pick in the metrics and ``selection.json``."""
        chosen = pick(self.selection, self.history)
        meta = {"train_config": self.cfg.to_dict(), "epochs": self.epochs_done, "steps": self.step,
                "history": self.history, "archive_header": self.archive.header,
                "tree_id": self.archive.header.get("tree_id"), "select": chosen.to_dict(),
                "input": self.input.to_dict(),
                "lr_schedule": {"schedule": self.cfg.lr_schedule, **self.plateau_state.to_dict()}}
        model = self._selected_model(chosen)
        priors, meta["priors"] = self._priors(model)
        path = save_final(self.cfg.exp / "final.pt", model, priors, self.archive.layout, meta)
        self._record_pick(chosen)
        log.info("%s; written to %s", chosen.describe(self.epochs_done), path)
        return path

    def _priors(self, model: BLSTM) -> tuple[Any, dict[str, Any]]:
        """The decoder's state priors (``--priors``): the archive's pdf counts, or ``model``'s mean
        posterior over spread training frames (``train/priors.py`` says why)."""
        counts = self.archive.priors
        if self.cfg.priors == "counts" or counts is None:
            return counts, {"source": "counts"}
        mean, frames = mean_posterior(model, with_context(self.archive, self.cfg.context), self.cfg.valid_batch,
                                      self.device, self.dtype, self.input.index)
        log.info("priors: the model's mean posterior over %d training frames (%s)", frames,
                 describe_shift(mean, np.asarray(counts, dtype=np.float64) / float(np.sum(counts))))
        return mean, {"source": "posterior", "frames": frames}

    def _selected_model(self, chosen: Pick) -> BLSTM:
        """This learner's model (``last``), or a copy holding the picked checkpoints' (mean) weights."""
        if self.selection.rule == "last":
            return self.model
        model = copy.deepcopy(self.model)
        model.load_state_dict(selected_state(self.cfg.exp, chosen))
        return model

    def _record_pick(self, chosen: Pick) -> None:
        """The pick as a ``select`` row of ``metrics.jsonl`` and as ``EXP/selection.json``."""
        record = {**chosen.to_dict(), "epochs_done": self.epochs_done, "stopped_early": self.plateau_state.stop}
        if self.metrics is not None:
            self.metrics.write("select", epoch=self.epochs_done, step=self.step, **record)
        write_text(self.cfg.exp / "selection.json", json.dumps(record, indent=1, sort_keys=True) + "\n")


def train(cfg: TrainConfig, strategy: Strategy | None = None, hooks: Hooks[Trainer] | None = None) -> TrainResult:
    """Train as ``cfg`` says on this learner (default: the single learner); closes the strategy."""
    strategy = strategy or Strategy()
    try:
        return Trainer(cfg, strategy).fit(hooks)
    finally:
        strategy.close()
