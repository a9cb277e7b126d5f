"""The paper's acoustic model: a deep bidirectional LSTM over fused features.

Input 260 (FMLLR 40 + i-vector 100 + logmel 40 with deltas), six bidirectional
LSTM layers of 512 cells per direction, a linear projection to 256 and an output
layer over the context-dependent HMM states (32,000 for Switchboard): about 43M
parameters. Every size is a field of :class:`ModelConfig`, so tests use tiny
models. The input normalisation (the archive's mean and standard deviation)
lives in buffers inside the model, so a saved model needs nothing else.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from asrtrain.core.errors import ConfigError
from asrtrain.model.config import ModelConfig

__all__ = ["BLSTM", "ModelConfig"]


def _cuda_autocast_bf16() -> bool:
    """Whether CUDA autocast to bf16 is on (the device-typed queries are torch >= 2.4's)."""
    try:
        return torch.is_autocast_enabled("cuda") and torch.get_autocast_dtype("cuda") == torch.bfloat16
    except (TypeError, AttributeError):
        return torch.is_autocast_enabled() and torch.get_autocast_gpu_dtype() == torch.bfloat16


class BLSTM(nn.Module):
    """Normalise → stacked BiLSTM → linear projection → logits over pdfs, per frame."""

    feat_mean: torch.Tensor
    feat_std: torch.Tensor

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.register_buffer("feat_mean", torch.zeros(config.input_dim))
        self.register_buffer("feat_std", torch.ones(config.input_dim))
        self.lstm = nn.LSTM(config.input_dim, config.hidden, num_layers=config.layers,
                            batch_first=True, bidirectional=True,
                            dropout=config.dropout if config.layers > 1 else 0.0)
        self.proj: nn.Linear | None = nn.Linear(2 * config.hidden, config.proj) if config.proj else None
        self.output = nn.Linear(config.output_input_dim, config.num_pdfs)

    def set_normalization(self, mean: Any, var: Any, floor: float = 1e-8) -> None:
        """Store the input statistics (e.g. the archive's ``mean``/``var``) in the model.

        A column whose variance is at most ``floor`` (constant in the training
        data) is only centred: dividing by a tiny deviation would turn any other
        value it takes at test time into a huge input.
        """
        mean_t = torch.as_tensor(mean, dtype=torch.float32).reshape(-1)
        var_t = torch.as_tensor(var, dtype=torch.float32).reshape(-1)
        if mean_t.numel() != self.config.input_dim or var_t.numel() != self.config.input_dim:
            raise ConfigError(f"normalisation has dim {mean_t.numel()}/{var_t.numel()}, "
                              f"the model's input is {self.config.input_dim}")
        with torch.no_grad():
            self.feat_mean.copy_(mean_t)
            self.feat_std.copy_(torch.where(var_t > floor, var_t, torch.ones_like(var_t)).sqrt())

    def _recurrent(self, h: torch.Tensor) -> torch.Tensor:
        """The LSTM stack, in bf16 where CUDA autocast asks for bf16.

        Autocast runs cuDNN's RNN in float16 whatever dtype it was given (seen with torch
        2.11 on an H200: the LSTM's output was float16 under bf16 autocast), and float16
        gradients without a loss scaler can underflow. Here the weights are cast to bf16
        for the call, as autocast casts them (the fp32 weights keep the gradients).
        """
        if h.is_cuda and _cuda_autocast_bf16():
            with torch.autocast("cuda", enabled=False):
                weights = {name: p.to(torch.bfloat16) for name, p in self.lstm.named_parameters()}
                out, _ = torch.func.functional_call(self.lstm, weights, (h.to(torch.bfloat16),))
            return out
        out, _ = self.lstm(h)
        return out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` [B, T, input_dim] → logits [B, T, num_pdfs]."""
        if x.dim() != 3 or x.shape[-1] != self.config.input_dim:
            raise ValueError(f"expected input [B, T, {self.config.input_dim}], got {tuple(x.shape)}")
        h = self._recurrent((x - self.feat_mean) / self.feat_std)
        if self.proj is not None:
            h = self.proj(h)
        return self.output(h)
