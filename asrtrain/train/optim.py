"""The optimizer a learner steps with: SGD with momentum (the papers') or Adam.

One place builds it and one place merges learners' states, so the trainer, the checkpoints and
a resume on another job shape agree on what the state holds. The strategies never look inside
it: SSGD allreduces gradients before the step and ADPSGD averages weights after it, so either
optimizer runs under all three.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from asrtrain.train.config import OPTIMIZERS

#: Adam's β2 (its β1 is --momentum); AdamW's weight decay is decoupled from the gradient.
ADAM_BETA2 = 0.999


def make_optimizer(name: str, params: Iterable[torch.nn.Parameter], lr: float, momentum: float,
                   nesterov: bool, weight_decay: float, device: torch.device) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (fused kernels on CUDA)."""
    fused = device.type == "cuda" or None
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, nesterov=nesterov,
                               weight_decay=weight_decay, fused=fused)
    if name == "adam":
        # capturable: its step may be recorded in a CUDA graph (train/graph_step.py); SGD needs no flag
        return torch.optim.AdamW(params, lr=lr, betas=(momentum, ADAM_BETA2),
                                 weight_decay=weight_decay, fused=fused, capturable=device.type == "cuda")
    raise ValueError(f"unknown optimizer {name!r}: one of {', '.join(OPTIMIZERS)}")


def state_kind(state: dict[str, Any]) -> str | None:
    """Which optimizer wrote ``state`` (an optimizer's state_dict): its param groups say it."""
    groups = state.get("param_groups") or [{}]
    if "betas" in groups[0]:
        return "adam"
    if "momentum" in groups[0]:
        return "sgd"
    return None


def mean_state(main: dict[str, Any], states: list[dict[str, Any]]) -> dict[str, Any]:
    """``main`` with every floating buffer of each parameter (SGD's momentum, Adam's first and second
    moments) averaged over the learners that have it; counters (Adam's ``step``) stay main's."""
    out = {"param_groups": main["param_groups"], "state": {}}
    for index, own in main["state"].items():
        entry = dict(own)
        for key, value in own.items():
            if key == "step" or not torch.is_tensor(value) or not torch.is_floating_point(value):
                continue
            held = [s["state"][index][key] for s in states
                    if index in s["state"] and s["state"][index].get(key) is not None]
            if held:
                entry[key] = torch.stack([b.to(value.device) for b in held]).mean(0)
        out["state"][index] = entry
    return out
