"""The training loop on a real (small) archive: learning, outputs, NaN stop, errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.archive import Archive
from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.checkpoint import list_checkpoints
from asrtrain.train.config import TrainConfig
from asrtrain.train.trainer import TrainingDiverged, train

TINY = ModelConfig(hidden=16, layers=1, proj=8)


def _cfg(archives: tuple[Path, Path], exp: Path, **kw: object) -> TrainConfig:
    train_h5, valid_h5 = archives
    base = dict(archive=train_h5, exp=exp, valid=valid_h5, epochs=3, batch=16, base_batch=16,
                lr=0.3, warmup_epochs=2, model=TINY, log_every=4, num_threads=1)
    base.update(kw)
    return TrainConfig(**base)  # type: ignore[arg-type]


def test_a_small_model_learns_and_writes_the_experiment(learnable_archives: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    result = train(_cfg(learnable_archives, exp))
    valid = Archive(learnable_archives[1])
    majority = valid.priors.max() / valid.priors.sum()
    accs = [row["valid_acc"] for row in result.history]
    assert len(accs) == 3 and 0.3 < majority < 0.5
    assert accs[-1] > majority + 0.3, (accs, majority)
    assert result.history[-1]["valid_loss"] < result.history[0]["valid_loss"]
    # lr: 0.3 (base = peak: batch 16 at base batch 16), warm-up over 2 epochs, then x 1/sqrt(2)
    assert [r["lr"] for r in result.history] == pytest.approx([0.3, 0.3, 0.3 / math.sqrt(2)])
    # metrics.jsonl: a step row every 4 steps and one row per epoch
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows if r["kind"] == "step"]
    assert steps == list(range(4, result.steps + 1, 4))
    assert all(r["frames_per_s"] > 0 and r["loss"] > 0 for r in rows if r["kind"] == "step")
    assert [r["epoch"] for r in rows if r["kind"] == "epoch"] == [1, 2, 3]
    assert [e for e, _ in list_checkpoints(exp)] == [1, 2, 3]
    # final.pt holds all decode needs and reproduces the validation figure
    train_archive = Archive(learnable_archives[0])
    final = load_final(exp / "final.pt")
    assert final.config == TINY.__class__(input_dim=8, hidden=16, layers=1, proj=8, num_pdfs=5)
    # the priors: the final model's mean posterior over every real training frame (a tiny archive)
    tf, tt = train_archive.read_chunks(0, train_archive.num_chunks)
    with torch.no_grad():
        post = torch.softmax(final.model(torch.from_numpy(tf.astype(np.float32))), -1).numpy()
    np.testing.assert_allclose(final.priors, post[tt >= 0].mean(0), rtol=1e-5)
    assert final.meta["priors"] == {"source": "posterior", "frames": int((tt >= 0).sum())}
    assert final.layout == train_archive.layout
    np.testing.assert_allclose(final.model.feat_mean.numpy(), train_archive.mean, rtol=1e-6)
    np.testing.assert_allclose(final.model.feat_std.numpy() ** 2, train_archive.var, rtol=1e-5)
    feats, targets = valid.read_chunks(0, valid.num_chunks)
    with torch.no_grad():
        pred = final.model(torch.from_numpy(feats.astype(np.float32))).argmax(-1).numpy()
    real = targets >= 0
    assert (pred[real] == targets[real]).mean() == pytest.approx(accs[-1])


def test_count_priors_are_the_archives_pdf_frequencies(learnable_archives: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    train(_cfg(learnable_archives, tmp_path / "exp", epochs=1, priors="counts"))
    counts = Archive(learnable_archives[0]).priors
    final = load_final(tmp_path / "exp" / "final.pt")
    np.testing.assert_allclose(final.priors, counts / counts.sum())
    assert final.meta["priors"] == {"source": "counts"}


def test_same_seed_same_weights_other_seed_differs(learnable_archives: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    weights = []
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        train(_cfg(learnable_archives, tmp_path / name, epochs=1, seed=seed, valid=None))
        weights.append(load_final(tmp_path / name / "final.pt").model.state_dict())
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert not torch.equal(weights[0]["output.weight"], weights[2]["output.weight"])


def test_nan_loss_stops_naming_the_step_and_keeps_the_checkpoint(
        learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    first = train(_cfg(learnable_archives, exp, epochs=1))
    good = {f.name: f.read_bytes() for f in (exp / "checkpoints" / "epoch-1").iterdir()}
    (exp / "final.pt").unlink()
    # an absurd learning rate: the first step of epoch 2 sends the weights to infinity
    with pytest.raises(TrainingDiverged) as info:
        train(_cfg(learnable_archives, exp, epochs=3, lr=1e38, clip=0.0))
    message = str(info.value)
    assert f"step {first.steps + 2} (epoch 2)" in message and "is not finite" in message
    assert str(exp / "checkpoints" / "epoch-1") in message
    assert [e for e, _ in list_checkpoints(exp)] == [1]
    assert {f.name: f.read_bytes() for f in (exp / "checkpoints" / "epoch-1").iterdir()} == good
    assert not (exp / "final.pt").exists()
    assert [p.name for p in (exp / "checkpoints").iterdir()] == ["epoch-1"]


def test_resume_refuses_another_model(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    train(_cfg(learnable_archives, exp, epochs=1, valid=None))
    with pytest.raises(ConfigError, match="differs from the one asked for"):
        train(_cfg(learnable_archives, exp, epochs=2, valid=None,
                   model=ModelConfig(hidden=12, layers=1, proj=8)))


def test_archive_errors(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    import kaldiio

    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream

    scp = tmp_path / "feats.scp"
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'feats.ark'},{scp}") as w:
        w("u1", np.zeros((30, 3), np.float32))
    no_targets = tmp_path / "decode.h5"
    write_archive(no_targets, [Stream("f", scp)])
    with pytest.raises(InputError, match="training archive has no targets"):
        train(_cfg(learnable_archives, tmp_path / "e1", archive=no_targets))
    with pytest.raises(InputError, match="held-out archive has no targets"):
        train(_cfg(learnable_archives, tmp_path / "e2", valid=no_targets))


def test_bf16_autocast_path_learns_on_cpu(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    from asrtrain.train.step import autocast_dtype, cpu_bf16_lstm_problem

    assert autocast_dtype("auto", torch.device("cpu")) is None
    assert autocast_dtype("auto", torch.device("cuda")) is torch.bfloat16
    assert autocast_dtype("fp32", torch.device("cuda")) is None
    if cpu_bf16_lstm_problem():
        with pytest.raises(ConfigError, match="--precision bf16: this CPU cannot run the LSTM in bf16"):
            train(_cfg(learnable_archives, tmp_path / "exp", epochs=2, precision="bf16"))
        pytest.skip(f"this CPU has no bf16 LSTM ({cpu_bf16_lstm_problem()}): the clear error was checked")
    result = train(_cfg(learnable_archives, tmp_path / "exp", epochs=2, precision="bf16"))
    valid = Archive(learnable_archives[1])
    assert result.history[-1]["valid_acc"] > valid.priors.max() / valid.priors.sum() + 0.2


def test_held_out_shards_cover_every_chunk_once(learnable_archives: tuple[Path, Path]) -> None:
    from asrtrain.train.validate import evaluate

    torch.manual_seed(0)
    from asrtrain.model.blstm import BLSTM

    valid = Archive(learnable_archives[1])
    model = BLSTM(ModelConfig(input_dim=8, hidden=4, layers=1, proj=0, num_pdfs=5))
    whole = evaluate(model, valid, 7, torch.device("cpu"), None)
    parts = [evaluate(model, valid, 7, torch.device("cpu"), None, rank=r, world_size=3) for r in range(3)]
    summed = [sum(p[i] for p in parts) for i in range(3)]
    assert summed[1:] == whole[1:] and whole[1] == valid.num_frames
    assert summed[0] == pytest.approx(whole[0], rel=1e-6)


def test_no_resume_starts_over_and_forgets_old_checkpoints(learnable_archives: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    train(_cfg(learnable_archives, exp, epochs=3, valid=None))
    result = train(_cfg(learnable_archives, exp, epochs=1, valid=None, resume=False))
    assert result.start_epoch == 1 and [e for e, _ in list_checkpoints(exp)] == [1]
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows if r["kind"] == "epoch"] == [1]
    # resuming a finished run trains nothing more and rewrites the same final model
    before = load_final(exp / "final.pt").model.state_dict()
    again = train(_cfg(learnable_archives, exp, epochs=1, valid=None))
    assert again.start_epoch == 2 and again.steps == result.steps
    after = load_final(exp / "final.pt").model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_step_granularity_raises_the_rate_within_epochs(learnable_archives: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    train(_cfg(learnable_archives, exp, epochs=3, valid=None, batch=16, base_batch=8, lr=0.05,
               warmup_epochs=3, warmup_granularity="step", log_every=1))
    rows = [json.loads(line) for line in (exp / "metrics.jsonl").read_text().splitlines()]
    lrs = {e: [r["lr"] for r in rows if r["kind"] == "step" and r["epoch"] == e] for e in (1, 2, 3)}
    assert lrs[1][0] == pytest.approx(0.05) and lrs[3] == pytest.approx([0.1] * len(lrs[3]))
    rising = lrs[1] + lrs[2]
    assert all(a < b for a, b in zip(rising, rising[1:], strict=False)) and rising[-1] < 0.1


def test_resume_refuses_another_archive_at_the_same_path(learnable_archives: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    """The chunk order a run resumes depends on its archive: another one there is refused."""
    import shutil

    path = tmp_path / "train.h5"
    shutil.copy(learnable_archives[0], path)
    cfg = _cfg((path, learnable_archives[1]), tmp_path / "exp", epochs=1)
    train(cfg)
    shutil.copy(learnable_archives[1], path)   # rewritten in place
    with pytest.raises(ConfigError, match="not the one this run was trained on"):
        train(_cfg((path, learnable_archives[1]), tmp_path / "exp", epochs=2))
    shutil.copy(learnable_archives[0], path)   # the same archive again: resumes
    assert train(_cfg((path, learnable_archives[1]), tmp_path / "exp", epochs=2)).start_epoch == 2
