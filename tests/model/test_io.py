"""final.pt: everything decode needs round-trips; bad files give one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from asrtrain.core.errors import InputError
from asrtrain.model.blstm import BLSTM, ModelConfig
from asrtrain.model.io import load_final, save_final


def test_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(1)
    cfg = ModelConfig(input_dim=6, hidden=4, layers=2, proj=3, num_pdfs=5)
    model = BLSTM(cfg)
    model.set_normalization(np.arange(6, dtype=np.float32), np.full(6, 4.0, np.float32))
    layout = [{"name": "fbank", "dim": 4, "offset": 0}, {"name": "ivector", "dim": 2, "offset": 4}]
    path = save_final(tmp_path / "final.pt", model, np.array([1.0, 3.0, 0.0, 4.0, 2.0]), layout,
                      {"epochs": 3, "note": "x"})
    loaded = load_final(path)
    assert loaded.config == cfg and loaded.layout == layout and loaded.meta == {"epochs": 3, "note": "x"}
    np.testing.assert_allclose(loaded.priors, [0.1, 0.3, 0.0, 0.4, 0.2])
    assert not loaded.model.training
    x = torch.randn(2, 21, 6)
    model.eval()
    assert torch.equal(loaded.model(x), model(x))
    assert torch.equal(loaded.model.feat_std, torch.full((6,), 2.0))
    assert [p.name for p in tmp_path.iterdir()] == ["final.pt"]  # no temporary left behind


def test_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such model file"):
        load_final(tmp_path / "missing.pt")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a torch file")
    with pytest.raises(InputError, match=f"{junk}: not a readable model file"):
        load_final(junk)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(InputError, match="not an asrtrain final model"):
        load_final(other)


def test_prior_count_must_match(tmp_path: Path) -> None:
    model = BLSTM(ModelConfig(input_dim=2, hidden=2, layers=1, proj=0, num_pdfs=3))
    with pytest.raises(ValueError, match="2 priors"):
        save_final(tmp_path / "f.pt", model, [1.0, 2.0], [], {})
    assert not (tmp_path / "f.pt").exists()
