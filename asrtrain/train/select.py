"""Which model becomes ``final.pt``: the last epoch's, the best held-out epoch's, or an average.

On a small corpus the BLSTM overfits: the held-out loss stops improving after a few
epochs and later epochs are worse. ``--select`` picks the model decode gets:

* ``last``: the weights after the last epoch trained;
* ``best``: the epoch-end weights with the lowest held-out loss (the earliest of
  equal ones); a speech researcher's default whenever there is a held-out set;
* ``average:N``: the element-wise mean of the last N epoch checkpoints' weights,
  as Kaldi nnet3's final combination/averaging does. The BLSTM has no BatchNorm
  (its only buffers are the fixed input normalisation), so no statistics need
  re-estimating after averaging: a plain parameter mean is the averaged model.

The rule is a pure function of the epoch history (:func:`pick`); the checkpoints it
may still pick are kept from pruning (:func:`needed_epochs`); the weights come from
those checkpoints (:func:`selected_state`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asrtrain.core.errors import ConfigError, InputError

if TYPE_CHECKING:
    import torch

RULES = ("auto", "last", "best", "average:N")


@dataclass(frozen=True)
class Selection:
    """A parsed ``--select``: ``rule`` is ``last``, ``best`` or ``average`` (``n`` epochs)."""

    rule: str
    n: int = 1

    def __str__(self) -> str:
        return f"average:{self.n}" if self.rule == "average" else self.rule


@dataclass(frozen=True)
class Pick:
    """The epochs whose weights make ``final.pt`` and why (recorded in the exp dir and the model)."""

    select: str
    epochs: list[int]
    losses: list[float | None]  # each picked epoch's held-out loss (None: no held-out set)

    @property
    def valid_loss(self) -> float | None:
        """The picked epoch's held-out loss (None for an average, or without a held-out set)."""
        return self.losses[0] if len(self.epochs) == 1 else None

    def to_dict(self) -> dict[str, Any]:
        return {"select": self.select, "epochs": list(self.epochs), "valid_loss": self.valid_loss,
                "valid_losses": list(self.losses)}

    def describe(self, epochs_done: int) -> str:
        """One log line: which epoch(s) and their held-out loss."""
        if self.select.startswith("average"):
            which = f"the average of epochs {self.epochs[0]}-{self.epochs[-1]}"
        else:
            which = f"epoch {self.epochs[0]} of {epochs_done}"
        loss = "" if self.valid_loss is None else f", held-out loss {self.valid_loss:.4f}"
        return f"final model: {which} (--select {self.select}{loss})"


def parse_selection(text: str, has_valid: bool) -> Selection:
    """``auto`` (best with a held-out set, else last), ``last``, ``best`` or ``average:N``."""
    if text == "auto":
        return Selection("best" if has_valid else "last")
    if text in ("last", "best"):
        if text == "best" and not has_valid:
            raise ConfigError("--select best needs --valid: it picks the epoch with the lowest held-out loss")
        return Selection(text)
    head, _, count = text.partition(":")
    if head == "average" and count.isdigit() and int(count) >= 1:
        return Selection("average", int(count))
    raise ConfigError(f"--select must be last, best or average:N (N >= 1), got {text!r}")


def _loss(row: dict[str, Any]) -> float | None:
    value = row.get("valid_loss")
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def best_epoch(history: list[dict[str, Any]]) -> int | None:
    """The epoch with the lowest finite held-out loss (the earliest of equal ones), or None."""
    scored = [(loss, row["epoch"]) for row in history if (loss := _loss(row)) is not None]
    return min(scored)[1] if scored else None


def _last(n: int, history: list[dict[str, Any]]) -> list[int]:
    """The last ``n`` epochs of ``history`` (all of them when fewer are done)."""
    last = int(history[-1]["epoch"])
    return list(range(max(1, last - n + 1), last + 1))


def pick(selection: Selection, history: list[dict[str, Any]]) -> Pick:
    """The epochs ``selection`` takes from ``history`` (one row per epoch done, in order)."""
    if not history:
        raise ConfigError("no epoch was trained: nothing to select a final model from")
    by_epoch = {row["epoch"]: row for row in history}
    if selection.rule == "average":
        epochs = _last(selection.n, history)
    else:
        best = best_epoch(history) if selection.rule == "best" else None
        epochs = _last(1, history) if best is None else [best]  # no finite held-out loss: the last
    return Pick(str(selection), epochs, [_loss(by_epoch[e]) if e in by_epoch else None for e in epochs])


def needed_epochs(selection: Selection, history: list[dict[str, Any]]) -> set[int]:
    """Epoch checkpoints that pruning must keep: those the selection may still pick."""
    if not history or selection.rule == "last":
        return set()
    if selection.rule == "best":
        best = best_epoch(history)
        return set() if best is None else {best}
    return set(_last(selection.n, history))


def _checkpoint_model(exp: Path, epoch: int) -> dict[str, torch.Tensor]:
    import torch  # here, not above: TrainConfig parses --select, and the CLI's --help needs no torch

    from asrtrain.train.checkpoint import checkpoint_dir, checkpoint_name

    path = checkpoint_dir(exp) / checkpoint_name(epoch) / "model.pt"
    if not path.is_file():
        raise InputError(f"the model of epoch {epoch} is needed for --select and its checkpoint is gone "
                         "(pruned by an earlier run's --keep-checkpoints?)", path)
    return dict(torch.load(path, map_location="cpu", weights_only=True))


def average_states(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The element-wise mean (in float64) of floating tensors; equal or non-floating ones from the first."""
    import torch

    out = {}
    for key, first in states[0].items():
        same = all(torch.equal(first, s[key]) for s in states[1:])
        if same or not torch.is_floating_point(first):
            out[key] = first
        else:
            out[key] = torch.stack([s[key].double() for s in states]).mean(0).to(first.dtype)
    return out


def selected_state(exp: Path, chosen: Pick) -> dict[str, torch.Tensor]:
    """The weights of ``chosen``: one epoch checkpoint's model, or the mean of several."""
    return average_states([_checkpoint_model(exp, e) for e in chosen.epochs])


def parse_selection_with_valid(value: str) -> Any:
    """``parse_selection`` as the command line checks it, before --valid is known."""
    return parse_selection(value, has_valid=True)
