"""Chunks with their neighbours' frames (``--context``): what is read, trained on and decoded.

Checked against the utterance's frames read independently (``read_utterance``): a chunk's
context is its own utterance's frames before and after it, zeros beyond the utterance, and
never counts in a loss; decoding scores each frame from exactly that window.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from asrtrain.core.errors import ConfigError
from asrtrain.data.archive import PAD_TARGET, Archive
from asrtrain.data.context import read_with_context, with_context
from asrtrain.data.loader import IGNORE_INDEX, ChunkLoader
from asrtrain.decode.loglikes import ModelScorer, decode_context
from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.config import TrainConfig
from asrtrain.train.trainer import train


def _window(x: np.ndarray, start: int, chunk: int, context: int) -> np.ndarray:
    """Frames ``[start - context, start + chunk + context)`` of the utterance ``x``, zeros outside it."""
    out = np.zeros((chunk + 2 * context, x.shape[1]), dtype=x.dtype)
    lo, hi = max(start - context, 0), min(start + chunk + context, len(x))
    out[lo - (start - context):hi - (start - context)] = x[lo:hi]
    return out


@pytest.mark.parametrize("context", [3, 21])
def test_each_chunk_gets_its_own_utterances_neighbouring_frames(learnable_archives: tuple[Path, Path],
                                                                context: int) -> None:
    archive = Archive(learnable_archives[0])
    chunk = archive.chunk
    for utt, first, count, frames in archive.utterances[:12]:
        x, y = archive.read_utterance(utt)
        assert y is not None
        feats, targets = read_with_context(archive, first, first + count, context)
        assert feats.shape == (count, chunk + 2 * context, archive.feat_dim)
        assert targets is not None
        for k in range(count):
            np.testing.assert_array_equal(feats[k].astype(np.float32),
                                          _window(x, k * chunk, chunk, context).astype(np.float16))
            own = np.full(chunk, PAD_TARGET)
            n = min(chunk, frames - k * chunk)
            own[:n] = y[k * chunk:k * chunk + n]
            np.testing.assert_array_equal(targets[k], np.r_[[PAD_TARGET] * context, own, [PAD_TARGET] * context])
    # any range of chunks, across utterances, reads as those chunks read one by one
    whole = read_with_context(archive, 5, 40, context)
    for i in range(5, 40):
        one = read_with_context(archive, i, i + 1, context)
        np.testing.assert_array_equal(whole[0][i - 5], one[0][0])
    with pytest.raises(ConfigError, match="context 22 frames"):
        read_with_context(archive, 0, 1, chunk + 1)


def test_the_loader_serves_context_frames_that_carry_no_target(learnable_archives: tuple[Path, Path]) -> None:
    plain = ChunkLoader(learnable_archives[0], batch_size=8, shuffle=False, prefetch=0)
    wide = ChunkLoader(learnable_archives[0], batch_size=8, shuffle=False, prefetch=0, context=4)
    for (x0, y0), (x4, y4) in zip(plain.epoch(0), wide.epoch(0), strict=True):
        assert x4.shape[1] == x0.shape[1] + 8
        assert torch.equal(x4[:, 4:-4], x0) and torch.equal(y4[:, 4:-4], y0)
        assert bool((y4[:, :4] == IGNORE_INDEX).all() and (y4[:, -4:] == IGNORE_INDEX).all())


def test_trained_with_context_decoded_with_it(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    cfg = TrainConfig(archive=learnable_archives[0], exp=exp, valid=learnable_archives[1], epochs=2, batch=16,
                      base_batch=16, lr=0.3, warmup_epochs=0, model=ModelConfig(hidden=16, layers=1, proj=8),
                      num_threads=1, context=5, tensorboard=False)
    result = train(cfg)
    final = load_final(exp / "final.pt")
    assert decode_context(final.meta) == 5 and decode_context(final.meta, 0) == 0
    # the held-out figures count the chunks' own frames only, scored with their context
    valid = Archive(learnable_archives[1])
    feats, targets = with_context(valid, 5).read_chunks(0, valid.num_chunks)
    with torch.no_grad():
        pred = final.model(torch.from_numpy(feats.astype(np.float32))).argmax(-1).numpy()
    real = targets >= 0
    assert int(real.sum()) == valid.num_frames
    assert (pred[real] == targets[real]).mean() == pytest.approx(result.history[-1]["valid_acc"])
    # decoding: each frame's score is the model's on its own chunk's window of the utterance
    scorer = ModelScorer(exp / "final.pt", learnable_archives[1], None)
    assert scorer.context == 5
    utt, _, count, frames = valid.utterances[3]
    x, _ = valid.read_utterance(utt)
    windows = np.stack([_window(x, k * valid.chunk, valid.chunk, 5) for k in range(count)])
    with torch.no_grad():
        logits = final.model(torch.from_numpy(windows.astype(np.float16).astype(np.float32)))
    expected = torch.log_softmax(logits[:, 5:-5], -1).reshape(-1, 5)[:frames] - scorer.log_prior
    np.testing.assert_allclose(scorer(utt), expected.numpy(), rtol=1e-5, atol=1e-5)


def test_a_model_trained_without_context_decodes_without(learnable_archives: tuple[Path, Path],
                                                                  tmp_path: Path) -> None:
    cfg = TrainConfig(archive=learnable_archives[0], exp=tmp_path / "exp", epochs=1, batch=16, base_batch=16,
                      lr=0.3, warmup_epochs=0, model=ModelConfig(hidden=8, layers=1, proj=0), num_threads=1,
                      tensorboard=False)
    train(cfg)
    assert ModelScorer(tmp_path / "exp" / "final.pt", learnable_archives[1], None).context == 0
    assert ModelScorer(tmp_path / "exp" / "final.pt", learnable_archives[1], None, 4).context == 4
    with pytest.raises(ConfigError, match="context 30 frames: must be 0 to the archive's chunk of 21"):
        ModelScorer(tmp_path / "exp" / "final.pt", learnable_archives[1], None, 30)
    with pytest.raises(ConfigError, match="context"):
        TrainConfig(archive=learnable_archives[0], exp=tmp_path / "e2", context=-1)
