"""--label-smoothing: the training loss the trainer minimises, the held-out loss left plain."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import ConfigError
from asrtrain.data.archive import Archive
from asrtrain.data.loader import IGNORE_INDEX
from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.config import TrainConfig
from asrtrain.train.step import frame_loss
from asrtrain.train.trainer import train

TINY = ModelConfig(hidden=16, layers=1, proj=8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5])
def test_the_loss_is_the_smoothed_targets_cross_entropy_on_real_frames(eps: float,
                                                                       dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 21, 7, generator=gen).to(dtype)
    targets = torch.randint(0, 7, (3, 21), generator=gen)
    targets[1, 15:] = IGNORE_INDEX                  # a padded chunk's tail
    loss, frames, _ = frame_loss(logits, targets, eps)
    logp = torch.log_softmax(logits.float().reshape(-1, 7), -1)
    y = targets.reshape(-1)
    real = y != IGNORE_INDEX
    q = torch.full((int(real.sum()), 7), eps / 7)       # 1 - eps on the pdf, eps spread over all
    q[torch.arange(q.shape[0]), y[real]] += 1 - eps
    expected = -(q * logp[real]).sum()
    assert int(frames) == 3 * 21 - 6
    tol = 1e-4 if dtype == torch.float32 else 2e-2
    assert float(loss) == pytest.approx(float(expected), rel=tol)


def test_smoothing_changes_training_and_the_held_out_loss_stays_plain(
        learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    train_h5, valid_h5 = learnable_archives
    finals = {}
    for name, eps in (("plain", 0.0), ("smooth", 0.3)):
        cfg = TrainConfig(archive=train_h5, exp=tmp_path / name, valid=valid_h5, epochs=1,
                          batch=16, base_batch=16, lr=0.3, model=TINY, num_threads=1,
                          select="last", label_smoothing=eps)
        result = train(cfg)
        finals[name] = (load_final(tmp_path / name / "final.pt"), result.history[-1])
    plain, smooth = finals["plain"][0].model, finals["smooth"][0].model
    assert not torch.equal(plain.output.weight, smooth.output.weight)
    # the held-out loss logged for the smoothed run is the plain cross-entropy of its model
    valid = Archive(valid_h5)
    feats, targets = valid.read_chunks(0, valid.num_chunks)
    with torch.no_grad():
        logits = smooth(torch.from_numpy(feats.astype(np.float32)))
    y = torch.from_numpy(targets.astype(np.int64)).reshape(-1)
    real = y >= 0                                        # the archive pads with -1
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1])[real], y[real])
    assert finals["smooth"][1]["valid_loss"] == pytest.approx(float(ce), rel=1e-4)


@pytest.mark.parametrize("eps", [-0.1, 1.0])
def test_a_smoothing_outside_0_1_is_refused(eps: float, learnable_archives: tuple[Path, Path],
                                            tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--label-smoothing"):
        TrainConfig(archive=learnable_archives[0], exp=tmp_path, label_smoothing=eps)
    out = CliRunner().invoke(cli, ["train", str(learnable_archives[0]), str(tmp_path / "e"),
                                   "--label-smoothing", str(eps)])
    assert out.exit_code == 2 and "--label-smoothing" in out.output
