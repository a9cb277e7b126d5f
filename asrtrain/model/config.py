"""The acoustic model's sizes, apart from the model so that reading them needs no torch.

Defaults are the paper's: input 260 (FMLLR 40 + i-vector 100 + logmel 40 with
deltas), six bidirectional LSTM layers of 512 cells per direction, a projection to
256 and an output layer over 32,000 context-dependent HMM states (about 43M
parameters). The command line builds its options from these fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from asrtrain.core.config import strict_from_dict
from asrtrain.core.errors import ConfigError


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the BLSTM acoustic model (defaults: the paper's)."""

    input_dim: int = 260
    hidden: int = 512
    layers: int = 6
    proj: int = 256
    num_pdfs: int = 32000
    dropout: float = 0.0

    def __post_init__(self) -> None:
        for name in ("input_dim", "hidden", "layers", "num_pdfs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"model {name} must be at least 1, got {getattr(self, name)}")
        if self.proj < 0:
            raise ConfigError(f"model proj must be 0 (none) or positive, got {self.proj}")
        if not 0.0 <= self.dropout < 1.0:
            raise ConfigError(f"model dropout must be in [0, 1), got {self.dropout}")

    @property
    def output_input_dim(self) -> int:
        """Width feeding the output layer: the projection, or both LSTM directions."""
        return self.proj if self.proj else 2 * self.hidden

    def num_parameters(self) -> int:
        """Trainable parameters, counted from the sizes (PyTorch's LSTM has two bias vectors)."""
        h = self.hidden
        total = 0
        for layer in range(self.layers):
            inp = self.input_dim if layer == 0 else 2 * h
            total += 2 * (4 * h * (inp + h) + 8 * h)
        if self.proj:
            total += 2 * h * self.proj + self.proj
        total += self.output_input_dim * self.num_pdfs + self.num_pdfs
        return total

    def macs_per_frame(self) -> int:
        """Multiply-accumulates of one forward pass per frame (the weight matrices only)."""
        h = self.hidden
        macs = 0
        for layer in range(self.layers):
            inp = self.input_dim if layer == 0 else 2 * h
            macs += 2 * 4 * h * (inp + h)
        if self.proj:
            macs += 2 * h * self.proj
        macs += self.output_input_dim * self.num_pdfs
        return macs

    def train_flops_per_frame(self) -> float:
        """FLOPs of forward + backward per frame: 2 per MAC, backward twice the forward."""
        return 3.0 * 2.0 * self.macs_per_frame()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Build from a mapping; unknown keys are an error naming them."""
        return strict_from_dict(cls, data, "model option")
