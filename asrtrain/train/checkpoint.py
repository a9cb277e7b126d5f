"""Checkpoints: ``EXP/checkpoints/epoch-N/`` holds the exact state after N epochs.

A checkpoint directory is written under a temporary name and renamed when all
its files are complete (:func:`asrtrain.core.atomic.atomic_path`), so a run
killed while writing leaves only a hidden temporary that resume ignores and
removes. It holds the model, the optimizer (momentum buffers), the RNG states
of torch, numpy and random, the strategy's state, the step and epoch (the
loader's position: the loader reshuffles from the seed and the epoch number, so
the next epoch's batches follow from these alone) and the training config.

A checkpoint of several learners also holds ``learner-<R>.pt`` for every rank
R: that learner's optimizer state, RNG states, strategy state and step (and its
weights when learners' weights differ). Each learner writes its file atomically
into a hidden staging directory (:func:`save_learner_state`); the main learner
moves all of them into the checkpoint before its rename, so an ``epoch-N``
directory exists only with every learner's file in it (:func:`save_epoch`).

:func:`restore` is the loop's resume step: it loads the last complete checkpoint
into this learner's model, optimizer, RNG and strategy, after checking that the
model and the number of learners are those of the checkpoint.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.core.atomic import atomic_path, is_temporary
from asrtrain.core.errors import AsrtrainError, ConfigError, InputError
from asrtrain.distributed.base import Strategy

log = logging.getLogger("asrtrain.train.checkpoint")

FILES = ("model.pt", "optimizer.pt", "trainer.pt")
_NAME = re.compile(r"^epoch-(\d+)$")
# Test hook: ``SECONDS`` or ``EPOCH:SECONDS`` to sleep between writing model.pt and
# optimizer.pt (of every checkpoint, or of that epoch's), so a test can SIGKILL the
# process while a checkpoint is half written.
SLEEP_ENV = "ASRTRAIN_TEST_CHECKPOINT_SLEEP"


def _test_pause(epoch: int) -> float:
    spec = os.environ.get(SLEEP_ENV, "").strip()
    if not spec:
        return 0.0
    when, _, seconds = spec.rpartition(":")
    return float(seconds) if not when or int(when) == epoch else 0.0


def checkpoint_dir(exp: Path) -> Path:
    return Path(exp) / "checkpoints"


def rng_state() -> dict[str, Any]:
    """Every random generator the loop touches."""
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def learner_file(rank: int) -> str:
    """The name of one learner's own state inside a checkpoint."""
    return f"learner-{rank}.pt"


def staging_dir(exp: Path, epoch: int) -> Path:
    """Where learners leave their files for epoch ``epoch`` (a temporary name: resume removes it)."""
    return checkpoint_dir(exp) / f".epoch-{epoch}.tmp-learners"


def save_learner_state(exp: Path, epoch: int, rank: int, state: dict[str, Any]) -> Path:
    """Write this learner's state (plus its RNG states) atomically into the staging directory."""
    stage = staging_dir(exp, epoch)
    stage.mkdir(parents=True, exist_ok=True)
    path = stage / learner_file(rank)
    with atomic_path(path) as tmp:
        torch.save({**state, "rank": rank, "epoch": epoch, "rng": rng_state()}, tmp)
    return path


def _collect_learners(exp: Path, epoch: int, learners: int, into: Path) -> None:
    """Move every learner's staged file into the checkpoint being written."""
    stage = staging_dir(exp, epoch)
    missing = [r for r in range(learners) if not (stage / learner_file(r)).is_file()]
    if missing:
        raise AsrtrainError(f"epoch {epoch} checkpoint: no state from learner rank(s) "
                            f"{', '.join(map(str, missing))}", stage)
    for r in range(learners):
        os.replace(stage / learner_file(r), into / learner_file(r))


def save_checkpoint(exp: Path, epoch: int, model: torch.nn.Module,
                    optimizer: torch.optim.Optimizer, trainer_state: dict[str, Any],
                    learners: int = 1) -> Path:
    """Write ``checkpoints/epoch-<epoch>/`` atomically and return its path.

    With ``learners`` > 1 every learner's staged file must be there already
    (:func:`save_learner_state`); they move in before the directory gets its name.
    """
    final = checkpoint_dir(exp) / f"epoch-{epoch}"
    with atomic_path(final) as tmp:
        tmp.mkdir(parents=True)
        torch.save(model.state_dict(), tmp / "model.pt")
        pause = _test_pause(epoch)
        if pause > 0:
            time.sleep(pause)
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        torch.save({**trainer_state, "epoch": epoch, "learners": learners, "rng": rng_state()},
                   tmp / "trainer.pt")
        if learners > 1:
            _collect_learners(exp, epoch, learners, tmp)
    if learners > 1:
        shutil.rmtree(staging_dir(exp, epoch), ignore_errors=True)
    log.info("checkpoint %s written", final)
    return final


def load_learner_state(path: Path, rank: int) -> dict[str, Any]:
    """Learner ``rank``'s own state from a checkpoint of several learners (on the CPU)."""
    name = learner_file(rank)
    try:
        return dict(torch.load(Path(path) / name, map_location="cpu", weights_only=False))
    except FileNotFoundError:
        raise InputError(f"checkpoint is missing {name}", path) from None
    except Exception as exc:  # a corrupt pickle: name the file, not a traceback
        raise InputError(f"cannot read checkpoint file {name}: {exc}", path) from None


def clean_temporaries(exp: Path) -> int:
    """Remove half-written checkpoints left by a killed run; return how many."""
    root = checkpoint_dir(exp)
    if not root.is_dir():
        return 0
    removed = 0
    for entry in root.iterdir():
        if is_temporary(entry):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink()
            removed += 1
    if removed:
        log.warning("removed %d incomplete checkpoint(s) left in %s", removed, root)
    return removed


def list_checkpoints(exp: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints as (epoch, path), oldest first."""
    root = checkpoint_dir(exp)
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _NAME.match(entry.name)
        if match and entry.is_dir() and all((entry / f).is_file() for f in FILES):
            found.append((int(match.group(1)), entry))
    return sorted(found)


def last_checkpoint(exp: Path) -> Path | None:
    """The checkpoint of the latest complete epoch, or None."""
    found = list_checkpoints(exp)
    return found[-1][1] if found else None


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """``{"model": state_dict, "optimizer": state_dict, "trainer": dict}`` of a checkpoint."""
    path = Path(path)
    out: dict[str, Any] = {}
    for name in FILES:
        try:
            # trainer.pt holds numpy/python RNG states: not a weights-only file.
            # RNG states must stay CPU tensors whatever the device: trainer.pt loads on CPU.
            where = "cpu" if name == "trainer.pt" else map_location
            out[name[:-3]] = torch.load(path / name, map_location=where,
                                        weights_only=(name != "trainer.pt"))
        except FileNotFoundError:
            raise InputError(f"checkpoint is missing {name}", path) from None
        except Exception as exc:  # a corrupt pickle: name the file, not a traceback
            raise InputError(f"cannot read checkpoint file {name}: {exc}", path) from None
    return out


def prune_checkpoints(exp: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` complete checkpoints (0: keep all); return the deleted."""
    if keep <= 0:
        return []
    old = [path for _, path in list_checkpoints(exp)[:-keep]]
    for path in old:
        shutil.rmtree(path)
    return old


def save_epoch(exp: Path, epoch: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
               strategy: Strategy, trainer_state: dict[str, Any], keep: int = 0) -> Path | None:
    """Checkpoint the end of ``epoch`` on every learner; returns its path on the main learner.

    Each learner of several stages its own state (optimizer, RNG, strategy, step, and
    its weights where learners' weights differ); the main learner then seals the
    checkpoint with all of them and prunes to the newest ``keep``.
    """
    if strategy.world_size > 1:
        own: dict[str, Any] = {"optimizer": optimizer.state_dict(), "step": trainer_state["step"],
                               "strategy": strategy.state_dict(), "world_size": strategy.world_size}
        if not strategy.weights_agree:
            own["model"] = model.state_dict()
        save_learner_state(exp, epoch, strategy.rank, own)
        strategy.barrier()
    path = None
    if strategy.is_main:
        path = save_checkpoint(exp, epoch, model, optimizer, {**trainer_state, "strategy": strategy.state_dict()},
                               learners=strategy.world_size)
        prune_checkpoints(exp, keep)
    strategy.barrier()
    return path


@dataclass(frozen=True)
class Restored:
    """Where a resumed run starts: the checkpoint, this learner's step, the epochs done, the history."""

    path: Path
    step: int
    epochs_done: int
    history: list[dict[str, Any]]


def restore(exp: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer, strategy: Strategy,
            model_config: dict[str, Any], device: torch.device | str = "cpu") -> Restored | None:
    """Load the last complete checkpoint of ``exp`` into this learner; ``None`` when there is none.

    A checkpoint of another model, or of another number of learners, is a clear error.
    """
    if strategy.is_main:
        clean_temporaries(exp)
    path = last_checkpoint(exp)
    if path is None:
        return None
    state = load_checkpoint(path, map_location=device)
    trainer = state["trainer"]
    saved_model = trainer.get("config", {}).get("model")
    if saved_model is not None and saved_model != model_config:
        raise ConfigError(f"the checkpoint's model {saved_model} differs from the one asked for "
                          f"{model_config}; use a new EXP or --no-resume", path)
    learners = int(trainer.get("learners", trainer.get("strategy", {}).get("world_size", 1)))
    if learners != strategy.world_size:
        raise ConfigError(f"the checkpoint was written by {learners} learner(s) and this job has "
                          f"{strategy.world_size}: resume with {learners}, or start over with --no-resume", path)
    own = dict(trainer, model=state["model"], optimizer=state["optimizer"])
    if learners > 1 and "learners" in trainer:
        own.update(load_learner_state(path, strategy.rank))
    elif learners > 1:  # written before learners kept their own state
        log.warning("%s holds the main learner's optimizer state only: every learner resumes with it", path)
    model.load_state_dict(own["model"])
    optimizer.load_state_dict(own["optimizer"])
    set_rng_state(own["rng"])
    strategy.load_state_dict(own.get("strategy", {}))
    log.info("resuming from %s (epoch %d done, step %d)", path, trainer["epoch"], own["step"])
    return Restored(path, int(own["step"]), int(trainer["epoch"]), list(trainer.get("history", [])))


def forget_earlier_run(exp: Path) -> None:
    """``--no-resume`` starts over: an earlier run's checkpoints must not be resumed later."""
    clean_temporaries(exp)
    old = list_checkpoints(exp)
    for _, path in old:
        shutil.rmtree(path)
    if old:
        log.warning("--no-resume: removed %d checkpoint(s) of an earlier run in %s", len(old), checkpoint_dir(exp))
