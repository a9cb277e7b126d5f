"""Checkpoints: ``EXP/checkpoints/epoch-N/`` holds the exact state after N epochs,
``epoch-N.step-S/`` the state in the middle of epoch N, at the main learner's step S.

A checkpoint directory is written under a temporary name and renamed when all
its files are complete (:func:`asrtrain.core.atomic.atomic_path`), so a run
killed while writing leaves only a hidden temporary that resume ignores and
removes. It holds the model, the optimizer (momentum buffers), the RNG states
of torch, numpy and random and of the learner's own generators (the SpecAugment
masks'), the strategy's state, the step and epoch (the
loader's position: the loader reshuffles from the seed and the epoch number, so
the next epoch's batches follow from these alone) and the training config.

A checkpoint of several learners also holds ``learner-<R>.pt`` for every rank
R: that learner's optimizer state, RNG states, strategy state and step (and its
weights when learners' weights differ). Each learner writes its file atomically
into a hidden staging directory (:func:`save_learner_state`); the main learner
moves all of them into the checkpoint before its rename, so a checkpoint
directory exists only with every learner's file in it (:func:`save`).

A mid-epoch checkpoint also holds, for every learner, the epoch's work in its hand
(the piece in progress with the chunk reached, the pieces claimed and not started)
and its running totals, and on the main learner the store's side of the epoch (the
counters, the pieces handed out again): an exact resume trains every chunk once.
Only the newest mid-epoch checkpoint is kept, and none once its epoch is complete.
:mod:`asrtrain.train.resume` reads checkpoints back, on the same number of learners or not.
"""

from __future__ import annotations

import logging
import os
import random
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.core.atomic import atomic_path, is_temporary, write_failure
from asrtrain.core.errors import AsrtrainError, InputError
from asrtrain.distributed.base import Strategy

log = logging.getLogger("asrtrain.train.checkpoint")

FILES = ("model.pt", "optimizer.pt", "trainer.pt")
_NAME = re.compile(r"^epoch-(\d+)(?:\.step-(\d+))?$")
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


class SaveClock:
    """When the main learner asks for a mid-epoch checkpoint: every so many minutes and/or steps."""

    def __init__(self, minutes: float | None, steps: int | None) -> None:
        self.minutes, self.steps = minutes, steps
        self.reset(0)

    def reset(self, step: int) -> None:
        """A checkpoint was just written at ``step``."""
        self._since, self._step = time.monotonic(), step

    def due(self, step: int) -> bool:
        if self.steps and step - self._step >= self.steps:
            return True
        return bool(self.minutes) and time.monotonic() - self._since >= 60.0 * float(self.minutes or 0)


def checkpoint_dir(exp: Path) -> Path:
    return Path(exp) / "checkpoints"


Generators = Mapping[str, torch.Generator]


def rng_state(generators: Generators | None = None) -> dict[str, Any]:
    """Every random generator the loop touches: the global ones, and the learner's own
    ``generators`` by name (the SpecAugment masks')."""
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if generators:
        state["generators"] = {name: g.get_state() for name, g in generators.items()}
    return state


def set_rng_state(state: dict[str, Any], generators: Generators | None = None) -> None:
    """Put back what :func:`rng_state` saved; a generator the state has none for (a run that had no
    masks until now) keeps its fresh seed."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    saved = state.get("generators", {})
    for name, generator in (generators or {}).items():
        if name in saved:
            generator.set_state(saved[name])


def learner_file(rank: int) -> str:
    """The name of one learner's own state inside a checkpoint."""
    return f"learner-{rank}.pt"


def checkpoint_name(epochs_done: int, mid_epoch_step: int | None = None) -> str:
    """``epoch-N`` after N epochs; ``epoch-(N+1).step-S`` in the middle of the next one."""
    return f"epoch-{epochs_done}" if mid_epoch_step is None else f"epoch-{epochs_done + 1}.step-{mid_epoch_step}"


def _key(name: str) -> tuple[int, int, int] | None:
    """Order of checkpoints: (epochs done, in the middle of the next one, step)."""
    match = _NAME.match(name)
    if not match:
        return None
    epoch, step = int(match.group(1)), match.group(2)
    return (epoch, 0, 0) if step is None else (epoch - 1, 1, int(step))


def staging_dir(exp: Path, name: str) -> Path:
    """Where learners leave their files for checkpoint ``name`` (a temporary name: resume removes it)."""
    return checkpoint_dir(exp) / f".{name}.tmp-learners"


def save_learner_state(exp: Path, name: str, rank: int, state: dict[str, Any],
                       generators: Generators | None = None) -> Path:
    """Write this learner's state (plus its RNG states) atomically into the staging directory."""
    stage = staging_dir(exp, name)
    stage.mkdir(parents=True, exist_ok=True)
    path = stage / learner_file(rank)
    with atomic_path(path) as tmp:
        _save(tmp, {**state, "rank": rank, "checkpoint": name, "rng": rng_state(generators)}, path)
    return path


def _save(tmp: Path, obj: Any, named: Path) -> None:
    """torch.save, where a failed write (a full disk) is an OSError naming the file."""
    try:
        torch.save(obj, tmp)
    except (RuntimeError, OSError) as exc:
        raise write_failure(named, exc) from None


def _collect_learners(exp: Path, name: str, ranks: list[int], into: Path) -> None:
    """Move every learner's staged file into the checkpoint being written."""
    stage = staging_dir(exp, name)
    missing = [r for r in ranks if not (stage / learner_file(r)).is_file()]
    if missing:
        raise AsrtrainError(f"checkpoint {name}: no state from learner rank(s) "
                            f"{', '.join(map(str, missing))}", stage)
    for r in ranks:
        os.replace(stage / learner_file(r), into / learner_file(r))


def save_checkpoint(exp: Path, name: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    trainer_state: dict[str, Any], learners: int | list[int] = 1,
                    generators: Generators | None = None) -> Path:
    """Write ``checkpoints/<name>/`` atomically and return its path.

    ``learners``: how many (ranks 0..n-1), or which ranks (some left an elastic job).
    With several, every learner's staged file must be there already
    (:func:`save_learner_state`); they move in before the directory gets its name.
    """
    ranks = list(range(learners)) if isinstance(learners, int) else list(learners)
    final = checkpoint_dir(exp) / name
    with atomic_path(final) as tmp:
        tmp.mkdir(parents=True)
        _save(tmp / "model.pt", model.state_dict(), final / "model.pt")
        pause = _test_pause(trainer_state.get("epoch", 0)) if trainer_state.get("mid_epoch") is None else 0.0
        if pause > 0:
            time.sleep(pause)
        _save(tmp / "optimizer.pt", optimizer.state_dict(), final / "optimizer.pt")
        _save(tmp / "trainer.pt", {**trainer_state, "learners": len(ranks), "learner_ranks": ranks,
                                   "rng": rng_state(generators)}, final / "trainer.pt")
        if ranks != [0]:
            _collect_learners(exp, name, ranks, tmp)
    if ranks != [0]:
        shutil.rmtree(staging_dir(exp, name), ignore_errors=True)
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


def all_checkpoints(exp: Path) -> list[tuple[tuple[int, int, int], Path]]:
    """Every complete checkpoint directory (epoch ends and mid-epoch) as (order key, path), oldest first."""
    root = checkpoint_dir(exp)
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        key = _key(entry.name)
        if key is not None and entry.is_dir() and all((entry / f).is_file() for f in FILES):
            found.append((key, entry))
    return sorted(found)


def list_checkpoints(exp: Path) -> list[tuple[int, Path]]:
    """Epoch-end checkpoints as (epochs done, path), oldest first."""
    return [(key[0], path) for key, path in all_checkpoints(exp) if key[1] == 0]


def last_checkpoint(exp: Path) -> Path | None:
    """The newest checkpoint (an epoch's end, or later in the middle of the next epoch), or None."""
    found = all_checkpoints(exp)
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


def prune_checkpoints(exp: Path, keep: int, protect: frozenset[int] = frozenset()) -> list[Path]:
    """Delete mid-epoch checkpoints older than the newest checkpoint, and all but the newest ``keep``
    epoch checkpoints (0: keep all) except those of the epochs in ``protect`` (the final model
    may still be made of them: :func:`asrtrain.train.select.needed_epochs`); return the deleted."""
    found = all_checkpoints(exp)
    old = [path for key, path in found[:-1] if key[1] == 1]
    if keep > 0:
        old += [path for epoch, path in list_checkpoints(exp)[:-keep] if epoch not in protect]
    for path in old:
        shutil.rmtree(path)
    return old


def save(exp: Path, name: str, model: torch.nn.Module, optimizer: torch.optim.Optimizer, strategy: Strategy,
         trainer_state: dict[str, Any], own: dict[str, Any], keep: int = 0,
         protect: frozenset[int] = frozenset(), generators: Generators | None = None) -> tuple[Path | None, bool]:
    """Checkpoint ``name`` on every learner; returns its path (main learner) and whether the job stops.

    ``trainer_state``: the main learner's view (step, config, history, epoch,
    mid_epoch); ``own``: what this learner alone knows besides its optimizer, RNG and
    strategy (mid-epoch: its work and running totals). Each learner of several
    stages its own file (with its weights where learners' weights differ); the main
    learner seals the checkpoint with all of them, prunes, and decides whether the
    job stops here (a preemption); every learner then reads that decision. ``keep`` and
    ``protect``: see :func:`prune_checkpoints`; ``generators``: the learner's own, saved with its
    RNG states.
    """
    mid_epoch = trainer_state.get("mid_epoch") is not None
    strategy_state = strategy.state_dict(mid_epoch=mid_epoch)
    ranks = strategy.learner_ranks()
    if strategy.world_size > 1:
        mine: dict[str, Any] = {"optimizer": optimizer.state_dict(), "step": trainer_state["step"],
                                "strategy": strategy_state, "world_size": strategy.world_size, **own}
        if strategy_state["own_weights"]:
            mine["model"] = model.state_dict()
        save_learner_state(exp, name, strategy.rank, mine, generators)
        strategy.barrier()
    path = None
    if strategy.is_main:
        path = save_checkpoint(exp, name, model, optimizer, {**trainer_state, **own, "strategy": strategy_state},
                               learners=ranks, generators=generators)
        prune_checkpoints(exp, keep, protect)
        strategy.decide_stop(name)
    strategy.barrier()
    return path, strategy.stops(name)


def forget_earlier_run(exp: Path) -> None:
    """``--no-resume`` starts over: an earlier run's checkpoints must not be resumed later."""
    clean_temporaries(exp)
    old = all_checkpoints(exp)
    for _, path in old:
        shutil.rmtree(path)
    if old:
        log.warning("--no-resume: removed %d checkpoint(s) of an earlier run in %s", len(old), checkpoint_dir(exp))
