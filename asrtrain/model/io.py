"""``final.pt``: a trained model with everything decoding needs, in one file.

It holds the weights (the input normalisation included: it is a buffer of the
model), the model config, the state priors (normalised to sum to 1; decode
turns posteriors into scaled likelihoods with them), the feature layout of the
archive the model was trained on (which streams, in which order), and free-form
metadata (training config, epochs, held-out figures). Stored as plain tensors
and Python values so it loads with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from asrtrain.core.atomic import atomic_path, write_failure
from asrtrain.core.errors import InputError
from asrtrain.model.blstm import BLSTM, ModelConfig

FORMAT = "asrtrain-final-1"


@dataclass
class FinalModel:
    """A loaded ``final.pt``: the model (eval mode, CPU), priors, layout, config, metadata."""

    model: BLSTM
    priors: np.ndarray | None
    layout: list[dict[str, Any]]
    config: ModelConfig
    meta: dict[str, Any]


def _normalised(priors: Any) -> torch.Tensor | None:
    if priors is None:
        return None
    p = torch.as_tensor(np.asarray(priors, dtype=np.float64))
    total = float(p.sum())
    if total <= 0 or not np.isfinite(total):
        raise ValueError("priors must have a positive finite sum")
    return p / total


def save_final(path: str | Path, model: BLSTM, priors: Any, layout: list[dict[str, Any]],
               extra: dict[str, Any] | None = None) -> Path:
    """Write ``final.pt`` atomically; ``priors`` are counts or probabilities per pdf."""
    pri = _normalised(priors)
    if pri is not None and pri.numel() != model.config.num_pdfs:
        raise ValueError(f"{pri.numel()} priors for a model with {model.config.num_pdfs} pdfs")
    state = {k: v.detach().to("cpu", torch.float32) if v.is_floating_point() else v.detach().cpu()
             for k, v in model.state_dict().items()}
    payload = {
        "format": FORMAT,
        "model_config": model.config.to_dict(),
        "state_dict": state,
        "priors": pri,
        "layout": [dict(item) for item in layout],
        "meta": _plain(dict(extra or {})),
    }
    path = Path(path)
    with atomic_path(path) as tmp:
        try:
            torch.save(payload, tmp)
        except (RuntimeError, OSError) as exc:  # a full disk: name the file
            raise write_failure(path, exc) from None
    return path


def _plain(value: Any) -> Any:
    """Values as plain Python (numpy scalars and arrays to lists) for a weights-only file."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def load_final(path: str | Path) -> FinalModel:
    """Read a ``final.pt``: errors name the file (missing, not ours, or inconsistent)."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such model file", path)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise InputError(f"not a readable model file ({type(exc).__name__})", path) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise InputError(f"not an asrtrain final model (expected format {FORMAT})", path)
    config = ModelConfig.from_dict(payload["model_config"])
    model = BLSTM(config)
    try:
        model.load_state_dict(payload["state_dict"])
    except RuntimeError as exc:
        raise InputError(f"weights do not match the model config: {str(exc).splitlines()[0]}",
                         path) from None
    model.eval()
    pri = payload.get("priors")
    priors = None if pri is None else pri.numpy().astype(np.float64)
    return FinalModel(model=model, priors=priors, layout=list(payload.get("layout") or []),
                      config=config, meta=dict(payload.get("meta") or {}))
