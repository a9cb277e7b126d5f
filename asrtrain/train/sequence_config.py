"""The options of sequence training (``train-seq``), apart from the trainer so that the CLI's
help loads no numpy or torch."""

from __future__ import annotations

from dataclasses import dataclass

from asrtrain.core.errors import ConfigError


@dataclass
class SequenceConfig:
    """Kaldi's nnet1 sMBR/MMI defaults where they carry over (acoustic scale 0.1, dropped
    frames); the rate is per frame of a step, as the cross-entropy trainer's."""

    acwt: float = 0.1
    lr: float = 0.004
    momentum: float = 0.9
    epochs: int = 2
    ce_weight: float = 0.1
    utts_per_step: int = 4
    drop_frames: bool = True
    seed: int = 0
    max_utts: int | None = None  # the first N utterances of an epoch (a quick look)
    diagnostic_utts: int = 300  # the objective's fixed sample, before training and after each epoch
    from_scratch: bool = False  # MODEL gives the shape, input and priors; its weights are drawn afresh (chain's way)
    final_lr: float | None = None  # the rate decays exponentially from lr to this over the epochs
    clip: float | None = None  # the summed gradient's norm is clipped to this

    def check(self) -> None:
        for ok, why in ((self.acwt > 0, f"--acwt must be > 0, got {self.acwt}"),
                        (self.lr > 0, f"--lr must be > 0, got {self.lr}"),
                        (0 <= self.momentum < 1, f"--momentum must be in [0, 1), got {self.momentum}"),
                        (self.epochs >= 1, f"--epochs must be >= 1, got {self.epochs}"),
                        (self.ce_weight >= 0, f"--ce-weight must be >= 0, got {self.ce_weight}"),
                        (self.utts_per_step >= 1, f"--utts-per-step must be >= 1, got {self.utts_per_step}"),
                        (self.diagnostic_utts >= 1, f"--diagnostic-utts must be >= 1, got {self.diagnostic_utts}"),
                        (self.final_lr is None or self.final_lr > 0, f"--final-lr must be > 0, got {self.final_lr}"),
                        (self.clip is None or self.clip > 0, f"--clip must be > 0, got {self.clip}")):
            if not ok:
                raise ConfigError(why)

    def epoch_lr(self, n: int) -> float:
        """Epoch ``n``'s rate: ``lr`` throughout, or from ``lr`` at the first epoch to ``final_lr``
        at the last, a constant factor each epoch (Kaldi's initial and final effective rates)."""
        if self.final_lr is None or self.epochs == 1:
            return self.lr
        return self.lr * (self.final_lr / self.lr) ** ((n - 1) / (self.epochs - 1))
