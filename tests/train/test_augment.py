"""SpecAugment masks (``--spec-augment``): where they fall, training batches only, exact resume."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from asrtrain.core.errors import ConfigError, Preempted
from asrtrain.data.archive import Archive
from asrtrain.data.streams import select_streams
from asrtrain.distributed import signals
from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.augment import SpecAugment, logmel_blocks, parse_spec_augment, spec_masker
from asrtrain.train.checkpoint import last_checkpoint, load_checkpoint
from asrtrain.train.config import TrainConfig
from asrtrain.train.hooks import Hooks
from asrtrain.train.trainer import train
from asrtrain.train.validate import evaluate

TINY = ModelConfig(hidden=8, layers=1, proj=0)
HEAVY = "F=2,f=2,T=2,t=4"  # of 5 bins and 21 frames: every batch has masks


def _cfg(archives: tuple[Path, ...], exp: Path, **kw: object) -> TrainConfig:
    base = dict(archive=archives[0], exp=exp, valid=archives[1], epochs=2, batch=16, base_batch=16,
                lr=0.3, warmup_epochs=0, model=TINY, log_every=1, num_threads=1, spec_augment=HEAVY)
    base.update(kw)
    return TrainConfig(**base)  # type: ignore[arg-type]


def test_parse_spec_augment() -> None:
    assert parse_spec_augment(None) is None and parse_spec_augment("off") is None
    assert parse_spec_augment("on") == SpecAugment() == SpecAugment(2, 8, 2, 5)
    assert str(SpecAugment()) == "F=2,f=8,T=2,t=5"
    assert parse_spec_augment("F=1, t=3") == SpecAugment(freq_masks=1, time_width=3)
    for bad, needle in (("F=2,x=3", "expected fields F=, f=, T=, t="), ("F2", "expected fields"),
                        ("T=-1", "T must be a whole number >= 0"), ("f=wide", "f must be a whole number")):
        with pytest.raises(ConfigError, match=needle):
            parse_spec_augment(bad)
    with pytest.raises(ConfigError, match="--spec-augment 'F=2,x=3'"):
        TrainConfig(archive=Path("a.h5"), exp=Path("e"), spec_augment="F=2,x=3")


def _zeros_by_chunk(x: np.ndarray, masked: np.ndarray, logmel: list[int], bins: int
                    ) -> list[tuple[set[int], set[int]]]:
    """(masked bins, masked frames) of each chunk, checking the masks' shape on the way."""
    out = []
    zero = masked == 0
    assert not (x == 0).any()  # the archive has no zeros of its own: a zero is a mask
    np.testing.assert_array_equal(masked[~zero], x[~zero])  # what is not zeroed is untouched
    others = [c for c in range(x.shape[-1]) if c not in logmel]
    assert not zero[..., others].any()  # only log-mel columns are masked
    for z in zero[..., logmel]:                       # [frames, logmel columns] of one chunk
        frames = {t for t in range(z.shape[0]) if z[t].all()}
        rest = np.delete(z, sorted(frames), axis=0)
        band = rest.all(axis=0).reshape(3, bins)       # columns zero in every unmasked frame
        assert (band == band[0]).all()                 # the same bins in static, delta, delta-delta
        assert (rest == np.tile(rest.all(axis=0), (rest.shape[0], 1))).all()  # nothing else zero
        out.append(({b for b in range(bins) if band[0, b]}, frames))
    return out


@pytest.mark.parametrize("streams", [None, ("logmel",), ("ivector", "logmel")])
def test_masks_fall_on_logmel_only_same_bins_in_each_block_short_spans(stream_archives, streams) -> None:
    arc = Archive(stream_archives[0])
    chosen = select_streams(arc, streams)
    spec = SpecAugment(freq_masks=2, freq_width=2, time_masks=2, time_width=4)
    masker = spec_masker(spec, arc.layout, chosen.columns, arc.chunk, seed=3, rank=0)
    logmel_entry = next(e for e in arc.layout if e["name"] == "logmel")
    assert logmel_blocks(logmel_entry) == 3
    logmel = [chosen.columns.index(c) for c in range(logmel_entry["offset"], logmel_entry["offset"] + 15)]
    feats, targets = arc.read_chunks(0, 40)
    full = (targets >= 0).all(axis=1)  # chunks without padding (whose zeros are not masks)
    x = torch.from_numpy(chosen.take(feats[full]).astype(np.float32))
    masked = masker(x).numpy()
    assert masked.shape == x.shape and not torch.equal(masker(x), masker(x))  # every draw is new
    chunks = _zeros_by_chunk(x.numpy(), masked, logmel, bins=5)
    assert all(len(frames) <= spec.time_masks * spec.time_width for _, frames in chunks)
    assert all(len(bins) <= spec.freq_masks * spec.freq_width for bins, _ in chunks)
    assert len(chunks) > 20 and sum(len(b) for b, _ in chunks) > 20 and sum(len(f) for _, f in chunks) > 40
    # the same seed and rank draw the same masks; another rank others
    again = spec_masker(spec, arc.layout, chosen.columns, arc.chunk, seed=3, rank=0)
    other = spec_masker(spec, arc.layout, chosen.columns, arc.chunk, seed=3, rank=1)
    assert torch.equal(again(x), torch.from_numpy(masked)) and not torch.equal(other(x), torch.from_numpy(masked))


def test_what_cannot_be_masked_is_one_error(stream_archives, learnable_archives, tmp_path: Path) -> None:
    arc = Archive(stream_archives[0])
    with pytest.raises(ConfigError) as info:
        train(_cfg(learnable_archives, tmp_path / "a"))
    assert str(info.value) == (f"{learnable_archives[0]}: --spec-augment masks the logmel stream, and this "
                               "archive has none (its streams: feats)")
    with pytest.raises(ConfigError, match="masks the logmel stream, which --streams leaves out"):
        train(_cfg(stream_archives, tmp_path / "b", streams="fmllr"))
    with pytest.raises(ConfigError, match="f=6: wider than the 5 logmel bins"):
        spec_masker(SpecAugment(freq_width=6), arc.layout, range(22), 21, 0, 0)
    with pytest.raises(ConfigError, match="t=21: a time mask must be shorter than the archive's 21-frame"):
        spec_masker(SpecAugment(freq_width=2, time_width=21), arc.layout, range(22), 21, 0, 0)


class Batches(Hooks):
    """The batches as the model saw them."""

    def __init__(self) -> None:
        self.x: list[np.ndarray] = []

    def after_step(self, trainer, x, y, lr) -> None:
        self.x.append(x.cpu().numpy().copy())


def test_training_batches_are_masked_held_out_never(stream_archives, tmp_path: Path) -> None:
    seen = Batches()
    result = train(_cfg(stream_archives, tmp_path / "exp", epochs=1), hooks=seen)
    logmel = list(range(7, 22))  # fmllr 0-3, ivector 4-6, logmel 7-21 (conftest.write_stream_archive)
    x = np.concatenate(seen.x)
    x = x[(x != 0).any(axis=-1)]  # real frames (padding is zeros everywhere)
    zero = x == 0
    assert zero[..., logmel].any() and not np.delete(zero, logmel, axis=-1).any()
    # the held-out figure is the unmasked held-out set's: what evaluate gives the saved model
    final = load_final(tmp_path / "exp" / "final.pt")
    loss, frames, _ = evaluate(final.model, Archive(stream_archives[1]), 256, torch.device("cpu"), None)
    # trained on a GPU, the held-out pass ran there: cuDNN's sums differ from the CPU's in the 6th digit
    rel = 1e-4 if torch.cuda.is_available() else 1e-6
    assert result.history[-1]["valid_loss"] == pytest.approx(loss / frames, rel=rel)
    assert final.meta["train_config"]["spec_augment"] == HEAVY


class StopAt(Hooks):
    """Ask for a preemption after step ``k`` (what a SIGTERM's handler records)."""

    def __init__(self, k: int) -> None:
        self.k = k

    def after_step(self, trainer, x, y, lr) -> None:
        if trainer.step == self.k:
            signals._state["signal"] = signal.SIGTERM


@pytest.mark.parametrize("k", [2, 7])  # mid-epoch 1 and mid-epoch 2 (84 chunks: 6 steps an epoch)
def test_stopped_and_resumed_with_masks_equals_unstopped(stream_archives, tmp_path: Path, k: int) -> None:
    ref = train(_cfg(stream_archives, tmp_path / "ref"))
    exp = tmp_path / "stopped"
    try:
        with pytest.raises(Preempted):
            train(_cfg(stream_archives, exp), hooks=StopAt(k))
    finally:
        signals._state["signal"] = None
    saved = load_checkpoint(last_checkpoint(exp))["trainer"]
    assert saved["step"] == k and "spec_augment" in saved["rng"]["generators"]
    got = train(_cfg(stream_archives, exp))
    assert got.steps == ref.steps and [(r["train_loss"], r["valid_loss"]) for r in got.history] == [(r["train_loss"], r["valid_loss"]) for r in ref.history]
    a = load_final(tmp_path / "ref" / "final.pt").model.state_dict()
    b = load_final(exp / "final.pt").model.state_dict()
    assert all(torch.equal(a[key], b[key]) for key in a)
    # the masks matter: other masks train other weights
    c = train(_cfg(stream_archives, tmp_path / "other", spec_augment="F=2,f=2,T=2,t=3"))
    assert c.history[-1]["train_loss"] != ref.history[-1]["train_loss"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the masked step never syncs the host")
def test_masks_on_the_gpu_are_the_cpu_masks_and_never_wait(stream_archives, tmp_path: Path) -> None:
    from asrtrain.train.device import ahead
    from asrtrain.train.trainer import Trainer

    arc = Archive(stream_archives[0])
    feats, _ = arc.read_chunks(0, 16)
    x = torch.from_numpy(feats.astype(np.float32))
    spec = SpecAugment(freq_width=2, time_width=4)
    on_cpu = spec_masker(spec, arc.layout, range(22), 21, seed=5, rank=0)(x)
    on_gpu = spec_masker(spec, arc.layout, range(22), 21, seed=5, rank=0)(x.cuda())
    assert torch.equal(on_gpu.cpu(), on_cpu)
    trainer = Trainer(_cfg(stream_archives, tmp_path / "exp", epochs=1, log_every=10 ** 6))
    batches = list(ahead(trainer.loader.epoch(1), trainer.device))
    trainer.train_step(trainer.model, batches[0], 0.1)  # first step: cuDNN and allocator set-up
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for batch in batches[1:4]:
            trainer.train_step(trainer.model, batch, 0.1)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert (batches[1].x == 0).any()
