"""Everything one training run needs, as one dataclass that crosses process boundaries.

Batch sizes count 21-frame chunks, as in the paper (batch 256 = 256 chunks).
``batch`` is the **effective** batch: the chunks consumed by one optimizer step
summed over all learners. It sets the learning rate (linear scaling from
``base_batch``). Each learner's loader batch is ``batch // world_size``
(:meth:`TrainConfig.per_learner_batch`; it must divide evenly), the same rule for
SSGD (the super-learner's allreduced step covers ``batch`` chunks) and for
ADPSGD/H-ADPSGD (the learners' batches add up to ``batch``, as in the papers'
"batch 12288 on 64 learners"). One learner: its batch is ``batch``.

Epochs are numbered from 1; ``checkpoints/epoch-N`` holds the state after N
complete epochs. ``asrtrain.train.run.run(cfg, dist_cfg)`` runs a config on
every learner of a job; ``asrtrain.train.trainer.train(cfg, strategy)`` on this one.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from asrtrain.core.config import strict_from_dict
from asrtrain.core.errors import ConfigError
from asrtrain.data.streams import parse_streams
from asrtrain.model.config import ModelConfig
from asrtrain.train.augment import SpecAugment, parse_spec_augment
from asrtrain.train.select import Selection, parse_selection

PRECISIONS = ("auto", "fp32", "bf16")
WARMUP_GRANULARITIES = ("epoch", "step")
LR_SCHEDULES = ("paper", "plateau")
#: final.pt's state priors: the model's mean posterior over training frames (Kaldi nnet3's
#: adjust-priors; train/priors.py says why), or the archive's pdf counts.
PRIOR_SOURCES = ("posterior", "counts")
#: sgd: momentum SGD (IBM's recipes); adam: AdamW (train/optim.py builds both). The rate is the
#: schedule's either way, so Adam's --lr is of Adam's scale (a scaled peak about 1e-3).
OPTIMIZERS = ("sgd", "adam")


@dataclass(frozen=True)
class TrainConfig:
    """A training run: data, experiment dir, schedule, optimizer, model, bookkeeping.

    ``model.input_dim`` and ``model.num_pdfs`` are overwritten by the archive's
    ``feat_dim`` (the width of the ``streams`` chosen) and ``num_pdfs`` when training
    starts (:meth:`with_archive_dims`), so a config file only needs the hidden sizes.
    """

    archive: Path
    exp: Path
    valid: Path | None = None
    epochs: int = 16
    batch: int = 256                 # effective batch in chunks per optimizer step (all learners)
    lr: float = 0.1                  # base learning rate at base_batch (0: weights move only by averaging)
    base_batch: int = 256
    warmup_epochs: int = 10          # base → peak linearly over these epochs (1 or 0: no warm-up)
    warmup_granularity: str = "epoch"  # "epoch": constant within an epoch; "step": interpolated
    anneal: float = 1.0 / math.sqrt(2.0)  # factor per epoch after the warm-up
    optimizer: str = "sgd"           # sgd (momentum) or adam (AdamW, beta1 = momentum): train/optim.py
    momentum: float = 0.9
    nesterov: bool = False
    weight_decay: float = 0.0
    clip: float = 5.0                # max global gradient norm; 0 disables clipping
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    log_every: int = 50              # a metrics.jsonl row every this many steps
    tensorboard: bool = True         # the metrics rows also as TensorBoard events under EXP/tensorboard
    resume: bool = True              # continue from the last complete checkpoint when one exists
    block_chunks: int | None = None  # loader block size (None: the loader's default)
    prefetch: int | None = None      # loader prefetch depth (None: the loader's default)
    precision: str = "auto"          # "auto": bf16 autocast on GPU, fp32 on CPU
    cuda_graph: bool = True          # on a GPU, the step replayed as one CUDA graph where it can be (graph_step.py)
    num_threads: int | None = None   # torch intra-op threads (None: leave torch's setting)
    valid_batch: int = 256           # chunks per held-out batch
    max_steps_per_epoch: int | None = None  # cut epochs short (smoke tests, benchmarks)
    keep_checkpoints: int = 0        # keep only the newest N checkpoints (0: keep all)
    save_every_minutes: float | None = None  # a mid-epoch checkpoint this often (wall clock)
    save_every_steps: int | None = None      # and/or every this many steps of the main learner
    lr_schedule: str = "paper"       # "paper": anneal every epoch; "plateau": halve on a held-out plateau
    plateau_threshold: float = 0.01  # plateau: relative held-out improvement that keeps the rate (Kaldi's 1%)
    plateau_stop: int | None = None  # plateau: end training at a plateau after this many halvings (None: never)
    select: str = "auto"             # final.pt: auto (best with a held-out set, else last), last, best, average:N
    streams: str | None = None       # comma list of the archive's streams the model reads (None: all of them)
    spec_augment: str | None = None  # SpecAugment masks of training batches, "F=2,f=8,T=2,t=5" (None: off)
    label_smoothing: float = 0.0     # training loss: this share of each frame's target spread over every pdf
    priors: str = "posterior"        # final.pt's state priors: the model's mean posterior, or the pdf counts
    context: int = 0                 # frames of each neighbouring chunk a chunk is given (its loss: its own frames)

    def __post_init__(self) -> None:
        object.__setattr__(self, "archive", Path(self.archive))
        object.__setattr__(self, "exp", Path(self.exp))
        if self.valid is not None:
            object.__setattr__(self, "valid", Path(self.valid))
        if isinstance(self.model, dict):
            object.__setattr__(self, "model", ModelConfig.from_dict(self.model))
        checks = [
            (self.epochs >= 1, f"epochs must be at least 1, got {self.epochs}"),
            (self.batch >= 1, f"batch must be at least 1, got {self.batch}"),
            (self.base_batch >= 1, f"base batch must be at least 1, got {self.base_batch}"),
            (math.isfinite(self.lr) and self.lr >= 0,
             f"learning rate must be a finite number >= 0, got {self.lr}"),
            (self.warmup_epochs >= 0, f"warm-up epochs must be >= 0, got {self.warmup_epochs}"),
            (self.warmup_granularity in WARMUP_GRANULARITIES,
             f"warm-up granularity must be one of {', '.join(WARMUP_GRANULARITIES)}"),
            (0 < self.anneal <= 1, f"anneal factor must be in (0, 1], got {self.anneal}"),
            (0 <= self.momentum < 1, f"momentum must be in [0, 1), got {self.momentum}"),
            (not self.nesterov or self.momentum > 0, "Nesterov needs a positive momentum"),
            (self.optimizer in OPTIMIZERS,
             f"--optimizer must be one of {', '.join(OPTIMIZERS)}, got {self.optimizer!r}"),
            (not self.nesterov or self.optimizer == "sgd", "--nesterov is SGD's; Adam has no Nesterov step"),
            (self.clip >= 0, f"clip must be >= 0, got {self.clip}"),
            (self.log_every >= 1, f"log_every must be at least 1, got {self.log_every}"),
            (self.precision in PRECISIONS, f"precision must be one of {', '.join(PRECISIONS)}"),
            (self.valid_batch >= 1, f"valid batch must be at least 1, got {self.valid_batch}"),
            (self.priors in PRIOR_SOURCES, f"priors must be one of {', '.join(PRIOR_SOURCES)}, got {self.priors}"),
            (self.max_steps_per_epoch is None or self.max_steps_per_epoch >= 1,
             "max_steps_per_epoch must be at least 1"),
            (self.keep_checkpoints >= 0, f"keep_checkpoints must be >= 0, got {self.keep_checkpoints}"),
            (self.save_every_minutes is None or self.save_every_minutes > 0,
             f"--save-every must be a positive number of minutes, got {self.save_every_minutes}"),
            (self.save_every_steps is None or self.save_every_steps >= 1,
             f"--save-every-steps must be at least 1, got {self.save_every_steps}"),
            (self.lr_schedule in LR_SCHEDULES, f"--lr-schedule must be one of {', '.join(LR_SCHEDULES)}, "
                                               f"got {self.lr_schedule!r}"),
            (self.lr_schedule != "plateau" or self.valid is not None,
             "--lr-schedule plateau needs --valid: it halves the rate when the held-out loss stops improving"),
            (0 <= self.plateau_threshold < 1,
             f"--plateau-threshold must be in [0, 1), got {self.plateau_threshold}"),
            (self.context >= 0, f"--context must be >= 0, got {self.context}"),
            (0 <= self.label_smoothing < 1,
             f"--label-smoothing must be in [0, 1), got {self.label_smoothing}"),
            (self.plateau_stop is None or self.plateau_stop >= 0,
             f"--plateau-stop must be >= 0, got {self.plateau_stop}"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message)
        parse_streams(self.streams)  # malformed: an error here, before anything is opened
        parse_spec_augment(self.spec_augment)
        chosen = self.selection
        if chosen.rule == "average" and chosen.n > self.epochs:
            raise ConfigError(f"--select {chosen} averages {chosen.n} epochs, but --epochs is {self.epochs}")

    @property
    def selection(self) -> Selection:
        """``select`` parsed, ``auto`` resolved: best with a held-out set, last without."""
        return parse_selection(self.select, self.valid is not None)

    @property
    def stream_names(self) -> tuple[str, ...] | None:
        """``streams`` parsed (:mod:`asrtrain.data.streams`); ``None``: the archive's whole input."""
        return parse_streams(self.streams)

    @property
    def augment(self) -> SpecAugment | None:
        """``spec_augment`` parsed (:mod:`asrtrain.train.augment`); ``None``: no masks."""
        return parse_spec_augment(self.spec_augment)

    def per_learner_batch(self, world_size: int) -> int:
        """Chunks per step on one learner: the effective batch split evenly."""
        if world_size < 1:
            raise ConfigError(f"world size must be at least 1, got {world_size}")
        if self.batch % world_size:
            raise ConfigError(f"batch {self.batch} does not split evenly over {world_size} learners")
        return self.batch // world_size

    def epoch_steps(self, chunks: int) -> tuple[int, int]:
        """(steps of an epoch of ``chunks``, chunks in its last step) for one learner or SSGD.

        Batches carry over the loader's blocks, so every step holds ``batch`` chunks
        but the epoch's last, whatever the block size.
        """
        steps = max(math.ceil(chunks / self.batch), 1)
        return steps, chunks - (steps - 1) * self.batch

    def with_archive_dims(self, feat_dim: int, num_pdfs: int) -> TrainConfig:
        """This config with the model's input and output sizes taken from the archive."""
        return replace(self, model=replace(self.model, input_dim=feat_dim, num_pdfs=num_pdfs))

    def to_dict(self) -> dict[str, Any]:
        """Plain YAML/JSON-able values (paths as strings, the model as a mapping)."""
        out = asdict(self)
        for key in ("archive", "exp", "valid"):
            if out[key] is not None:
                out[key] = str(out[key])
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error naming them."""
        return strict_from_dict(cls, data, "training option")
