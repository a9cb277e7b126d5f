"""SpecAugment-style masking of training batches (``asrtrain train --spec-augment``).

Why: a cheap regulariser for small corpora, to ablate against dropout and input choices.
Each 21-frame chunk of a training batch gets ``F`` frequency masks (a band of up to ``f``
log-mel bins, zeroed in the static, Δ and ΔΔ blocks alike: a Δ bin describes the same
band as its static bin) and ``T`` time masks (up to ``t`` frames of every log-mel
column). Widths are drawn from 0 to the maximum, starts so the band fits, as in Park et
al. (2019). Masked values become 0: the archive's features are CMVN-normalised, so 0 is
the mean. The other streams (fMLLR, i-vectors) are left alone, and held-out evaluation
and decoding never see masks: they read the archive, not the training step.

Where log-mel sits comes from the archive's header (the ``logmel`` stream's offset and
width); a width of 3·B columns is B bins with Δ and ΔΔ (``prepare features --deltas``),
any other width B bins alone, unless the layout entry says ``deltas`` itself.

The masks come from a generator of their own, seeded from the run's seed and the
learner's rank (learners mask their different batches differently), whose state is saved
with the learner's RNG states in every checkpoint: a resumed run draws the masks the
uninterrupted one would have.

Torch is imported where it is used: the training config parses ``--spec-augment`` with
:func:`parse_spec_augment`, and the command line must start fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asrtrain.core.errors import ConfigError

if TYPE_CHECKING:
    import torch

#: The stream masked: log-mel filterbanks (the recipes' ``--stream logmel=…``).
LOGMEL = "logmel"
_FIELDS = {"F": "freq_masks", "f": "freq_width", "T": "time_masks", "t": "time_width"}


@dataclass(frozen=True)
class SpecAugment:
    """How many masks of which widths, per chunk (defaults: two bands of up to 8 of 40 bins, two
    spans of up to 5 of 21 frames)."""

    freq_masks: int = 2   # F
    freq_width: int = 8   # f: bins
    time_masks: int = 2   # T
    time_width: int = 5   # t: frames

    def __str__(self) -> str:
        return ",".join(f"{key}={getattr(self, name)}" for key, name in _FIELDS.items())


def parse_spec_augment(text: str | None) -> SpecAugment | None:
    """``"F=2,f=8,T=2,t=5"`` (fields left out keep their defaults), ``"on"`` (the defaults),
    or ``None``/``"off"`` (no masking)."""
    if text is None or text.strip().lower() in ("", "off", "none"):
        return None
    if text.strip().lower() == "on":
        return SpecAugment()
    values: dict[str, int] = {}
    for part in text.split(","):
        key, sep, value = (s.strip() for s in part.partition("="))
        if key not in _FIELDS or not sep:
            raise ConfigError(f"--spec-augment {text!r}: expected fields F=, f=, T=, t= (e.g. F=2,f=8,T=2,t=5), "
                              f"got {part.strip()!r}")
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < 0:
            raise ConfigError(f"--spec-augment {text!r}: {key} must be a whole number >= 0, got {value!r}")
        values[_FIELDS[key]] = number
    return SpecAugment(**values)


def logmel_blocks(entry: dict[str, Any]) -> int:
    """Blocks of the log-mel stream: 3 (static, Δ, ΔΔ) or 1 (static bins only)."""
    if "deltas" in entry:
        return 3 if entry["deltas"] else 1
    dim = int(entry["dim"])
    return 3 if dim % 3 == 0 else 1


def mask_seed(seed: int, rank: int) -> int:
    """The masks' seed of one learner: the run's seed and the rank, mixed."""
    import numpy as np

    return int(np.random.SeedSequence([seed, rank, 0x5BEC]).generate_state(1, np.uint64)[0]) >> 1


class SpecMasker:
    """Masks batches [B, frames, input] of a model input whose log-mel stream is the ``blocks`` × ``bins``
    columns from ``start`` (a stream's columns stay together whatever ``--streams`` picks)."""

    def __init__(self, spec: SpecAugment, start: int, blocks: int, bins: int, input_dim: int, seed: int) -> None:
        import torch

        self.spec = spec
        self.start, self.blocks, self.bins = start, blocks, bins
        self.input_dim = input_dim
        #: The masks' own generator: its state is part of the learner's checkpointed RNG states.
        self.generator = torch.Generator().manual_seed(seed)

    def draw(self, chunks: int, frames: int) -> torch.Tensor:
        """Starts and widths of every mask of ``chunks`` chunks, int64 [chunks, 2·(F + T)] (CPU):
        the frequency masks' starts, their widths, the time masks' starts, their widths."""
        import torch

        s, g = self.spec, self.generator

        def spans(count: int, most: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
            width = torch.randint(0, min(most, size) + 1, (chunks, count), generator=g)
            start = (torch.rand(chunks, count, generator=g, dtype=torch.float64) * (size - width + 1)).long()
            return start, width

        return torch.cat([*spans(s.freq_masks, s.freq_width, self.bins),
                          *spans(s.time_masks, s.time_width, frames)], dim=1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` with this step's masks zeroed (a new tensor; every draw advances the generator)."""
        import torch

        chunks, frames, width = x.shape
        if width != self.input_dim:
            raise ValueError(f"expected input width {self.input_dim}, got {width}")
        draws = self.draw(chunks, frames)
        if x.is_cuda:  # from pinned memory the copy queues behind the step, the host does not wait
            draws = draws.pin_memory()
        draws = draws.to(x.device, non_blocking=True)
        nf, nt = self.spec.freq_masks, self.spec.time_masks
        fs, fw, ts, tw = draws.split([nf, nf, nt, nt], dim=1)
        band = _covered(torch.arange(self.bins, device=x.device), fs, fw)   # [B, bins]
        span = _covered(torch.arange(frames, device=x.device), ts, tw)      # [B, frames]
        keep = (~band)[:, None, None, :] & (~span)[:, :, None, None]        # [B, frames, 1, bins]: every block alike
        out = x.clone()
        logmel = out[..., self.start:self.start + self.blocks * self.bins].unflatten(-1, (self.blocks, self.bins))
        logmel.mul_(keep.to(x.dtype))  # a product, not masked_fill: half the time on a CPU (0 × -x is -0.0, still 0)
        return out


def _covered(positions: torch.Tensor, start: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
    """[B, len(positions)]: whether a position lies in any of a row's spans ``[start, start + width)``."""
    p = positions[None, None, :]
    return ((p >= start[:, :, None]) & (p < (start + width)[:, :, None])).any(dim=1)


def spec_masker(spec: SpecAugment, layout: list[dict[str, Any]], columns: Sequence[int], chunk: int,
                seed: int, rank: int, where: Any = None) -> SpecMasker:
    """The masker of a model reading the archive ``columns`` (its layout ``layout``, chunks of
    ``chunk`` frames), or one error saying why the masks cannot apply."""
    entry = next((e for e in layout if e.get("name") == LOGMEL), None)
    if entry is None:
        names = ", ".join(str(e.get("name")) for e in layout) or "none"
        raise ConfigError(f"--spec-augment masks the {LOGMEL} stream, and this archive has none "
                          f"(its streams: {names})", where)
    offset, dim = int(entry["offset"]), int(entry["dim"])
    columns = list(columns)
    if offset not in columns:
        raise ConfigError(f"--spec-augment masks the {LOGMEL} stream, which --streams leaves out", where)
    start = columns.index(offset)
    assert columns[start:start + dim] == list(range(offset, offset + dim)), "streams are picked whole"
    blocks = logmel_blocks(entry)
    size = dim // blocks
    if spec.freq_width > size:
        raise ConfigError(f"--spec-augment f={spec.freq_width}: wider than the {size} {LOGMEL} bins", where)
    if spec.time_width >= chunk:
        raise ConfigError(f"--spec-augment t={spec.time_width}: a time mask must be shorter than the "
                          f"archive's {chunk}-frame chunks", where)
    return SpecMasker(spec, start, blocks, size, len(columns), mask_seed(seed, rank))
