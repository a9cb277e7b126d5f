"""The training step captured once as a CUDA graph and replayed: one launch instead of thousands.

At small batches the BLSTM's step is launch-bound: the paper's model issues about 2,500 cuDNN
cell kernels a step, and the host cannot queue them as fast as the GPU runs them (the Trainer
kept 0.54 of the raw loop's speed at batch 128; the raw step replayed as a graph ran 3.8× it).
A graph replays forward, loss, backward, clipping and the optimizer as recorded, so it needs
fixed shapes and fixed addresses:

- the batch is copied into static tensors of the learner's full batch; a short batch (an
  epoch's last) is padded with chunks whose targets are all ``IGNORE_INDEX``, which add nothing
  to the loss, the gradient or the figures (an eager step beside the graph would hold a second
  step's activations: 55 GB more for the paper's model at batch 8,192);
- the rate and the loss's denominator change every step: device scalars filled before each
  replay (the optimizer reads its rate from a tensor while capturing);
- the optimizer's state must exist before capture: the first steps run eagerly (on a side
  stream, as capture requires) and then the step is captured;
- nothing may replace a parameter, gradient or momentum tensor afterwards. Gossip and the
  epoch's averaging write into the parameters in place; a resume builds a new Trainer.

What cannot be replayed as recorded takes the eager step, and :func:`why_not` says why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch

from asrtrain.data.loader import IGNORE_INDEX

log = logging.getLogger(__name__)

#: (summed loss, correct frames, gradient norm or None): what a step hands the figures
Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]
#: the step's arithmetic: (x, y, loss denominator, autocast cache?) -> outputs
StepFn = Callable[[torch.Tensor, torch.Tensor, Any, bool], Outputs]

#: eager steps before the capture: lazy initialisation (cuDNN plans, the optimizer's state,
#: the allocator's blocks) happens in them, outside the graph
WARMUP_STEPS = 3


def why_not(device: torch.device, own_model: bool, spec_augment: bool, dropout: float) -> str | None:
    """Why this learner's step cannot be captured (None when it can)."""
    if device.type != "cuda":
        return "not on a GPU"
    if not own_model:
        return "the model is wrapped (DDP's gradient hooks run on the host)"
    if spec_augment:
        return "SpecAugment draws new masks on the host each step"
    if dropout > 0:
        return "cuDNN's dropout keeps a random state a replay would not advance"
    return None


def fill(static_x: torch.Tensor, static_y: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> None:
    """Copy a batch of at most the static tensors' rows into them; the rows past it become
    padding chunks (zero input, every target ``IGNORE_INDEX``)."""
    rows = x.shape[0]
    static_x[:rows].copy_(x, non_blocking=True)
    static_y[:rows].copy_(y, non_blocking=True)
    if rows < static_x.shape[0]:
        static_x[rows:].zero_()
        static_y[rows:].fill_(IGNORE_INDEX)


class CapturedStep:
    """``fn`` at the learner's full batch of ``rows`` chunks, run eagerly for
    :data:`WARMUP_STEPS` steps, then captured and replayed (short batches padded).

    Call it with each batch, the optimizer's rate already set to ``lr``; it returns the step's outputs, or None when the caller must run
    the eager step itself (before the capture, a batch of another chunk shape, or a failed
    capture: said once in the log).
    """

    def __init__(self, fn: StepFn, optimizer: torch.optim.Optimizer, device: torch.device, rows: int) -> None:
        self.fn, self.optimizer, self.device, self.rows = fn, optimizer, device, rows
        self.warm = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.failed: str | None = None
        self.replays = 0
        self.static: dict[str, torch.Tensor] = {}
        self.out: Outputs | None = None

    def __call__(self, x: torch.Tensor, y: torch.Tensor, lr: float, denominator: float) -> Outputs | None:
        if self.failed is not None or x.shape[0] > self.rows:
            return None
        if self.graph is None:
            if x.shape[0] < self.rows:
                return None  # captured at the full batch only
            if self.warm < WARMUP_STEPS:
                self.warm += 1
                return self._side_stream(x, y, denominator)
            if not self._capture(x, y, lr, denominator):
                return None
        if x.shape[1:] != self.static["x"].shape[1:] or y.shape[1:] != self.static["y"].shape[1:]:
            return None
        fill(self.static["x"], self.static["y"], x, y)
        self.static["lr"].fill_(lr)
        self.static["denominator"].fill_(denominator)
        assert self.graph is not None and self.out is not None
        self.graph.replay()
        self.replays += 1
        return self.out

    def _side_stream(self, x: torch.Tensor, y: torch.Tensor, denominator: float) -> Outputs:
        """An eager step off the default stream, as the warm-up before a capture must be (the
        caller has set the optimizer's rate)."""
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out = self.fn(x, y, denominator, True)
        main.wait_stream(side)
        return out

    def _capture(self, x: torch.Tensor, y: torch.Tensor, lr: float, denominator: float) -> bool:
        """Record the step on static tensors; False (and the reason logged) when capture fails."""
        self.static = {"x": x.clone(), "y": y.clone(),
                       "lr": torch.tensor(lr, dtype=torch.float32, device=self.device),
                       "denominator": torch.tensor(float(denominator), dtype=torch.float32, device=self.device)}
        graph = torch.cuda.CUDAGraph()
        for group in self.optimizer.param_groups:
            group["lr"] = self.static["lr"]
        try:
            torch.cuda.synchronize(self.device)
            # thread_local: the loader's and gossip's threads go on using CUDA during the capture
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                self.out = self.fn(self.static["x"], self.static["y"], self.static["denominator"], False)
        except Exception as exc:  # noqa: BLE001 -- any refusal: the eager step goes on
            self.failed = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log.warning("the training step could not be captured as a CUDA graph (%s): eager steps", self.failed)
            self.optimizer.zero_grad(set_to_none=True)
            return False
        finally:
            for group in self.optimizer.param_groups:
                group["lr"] = lr
        self.graph = graph
        log.info("training step captured as a CUDA graph at batch %s", tuple(x.shape))
        return True
