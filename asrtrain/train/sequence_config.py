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

    def check(self) -> None:
        for ok, why in ((self.acwt > 0, f"--acwt must be > 0, got {self.acwt}"),
                        (self.lr > 0, f"--lr must be > 0, got {self.lr}"),
                        (0 <= self.momentum < 1, f"--momentum must be in [0, 1), got {self.momentum}"),
                        (self.epochs >= 1, f"--epochs must be >= 1, got {self.epochs}"),
                        (self.ce_weight >= 0, f"--ce-weight must be >= 0, got {self.ce_weight}"),
                        (self.utts_per_step >= 1, f"--utts-per-step must be >= 1, got {self.utts_per_step}"),
                        (self.diagnostic_utts >= 1, f"--diagnostic-utts must be >= 1, got {self.diagnostic_utts}")):
            if not ok:
                raise ConfigError(why)
