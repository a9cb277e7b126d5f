"""Training on some of an archive's streams (``--streams``): the model's input, held-out, final.pt,
decoding by name, resume, and the one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.archive import Archive
from asrtrain.decode.loglikes import ModelScorer, log_priors
from asrtrain.model.blstm import ModelConfig
from asrtrain.model.io import load_final
from asrtrain.train.checkpoint import last_checkpoint, load_checkpoint
from asrtrain.train.config import TrainConfig
from asrtrain.train.hooks import Hooks
from asrtrain.train.trainer import train
from asrtrain.train.validate import evaluate

TINY = ModelConfig(hidden=8, layers=1, proj=0)
FMLLR = list(range(0, 4))
LOGMEL = list(range(7, 22))  # train.h5: fmllr 0-3, ivector 4-6, logmel 7-21 (conftest.write_stream_archive)


def _cfg(archives: tuple[Path, ...], exp: Path, **kw: object) -> TrainConfig:
    base = dict(archive=archives[0], exp=exp, valid=archives[1], epochs=1, batch=16, base_batch=16,
                lr=0.3, warmup_epochs=0, model=TINY, log_every=1, num_threads=1, streams="logmel")
    base.update(kw)
    return TrainConfig(**base)  # type: ignore[arg-type]


class Batches(Hooks):
    def __init__(self) -> None:
        self.x: list[np.ndarray] = []

    def after_step(self, trainer, x, y, lr) -> None:
        self.x.append(x.numpy().copy())


@pytest.mark.parametrize("streams, columns", [("logmel", LOGMEL), ("logmel,fmllr", FMLLR + LOGMEL)])
def test_the_model_reads_exactly_the_named_columns(stream_archives, tmp_path: Path, streams: str,
                                                   columns: list[int]) -> None:
    seen = Batches()
    exp = tmp_path / "exp"
    result = train(_cfg(stream_archives, exp, streams=streams), hooks=seen)
    arc = Archive(stream_archives[0])
    feats, _ = arc.read_chunks(0, arc.num_chunks)
    # every chunk trained on is one of the archive's chunks, cut to those columns (archive order)
    chunks = {c.tobytes() for c in feats[..., columns].astype(np.float32)}
    batches = np.concatenate(seen.x)
    assert batches.shape == (arc.num_chunks, arc.chunk, len(columns))
    assert {c.tobytes() for c in batches} == chunks
    final = load_final(exp / "final.pt")
    assert final.config.input_dim == len(columns)
    np.testing.assert_allclose(final.model.feat_mean.numpy(), arc.mean[columns], rtol=1e-6)
    names = [n for n in ("fmllr", "ivector", "logmel") if n in streams.split(",")]
    record = {"streams": names, "columns": columns, "source_dim": 22, "by_name": True}
    assert final.meta["input"] == record and final.meta["train_config"]["streams"] == streams
    assert load_checkpoint(last_checkpoint(exp))["trainer"]["input"] == record
    # the held-out set is read by the same names
    valid = Archive(stream_archives[1])
    loss, frames, _ = evaluate(final.model, valid, 256, torch.device("cpu"), None, columns=columns)
    assert result.history[-1]["valid_loss"] == pytest.approx(loss / frames, rel=1e-6)


def test_a_logmel_model_decodes_an_archive_of_all_streams_by_name(stream_archives, tmp_path: Path) -> None:
    train(_cfg(stream_archives, tmp_path / "exp", epochs=2))
    final_pt = tmp_path / "exp" / "final.pt"
    final = load_final(final_pt)
    prior = torch.from_numpy(log_priors(final.priors, 5, final_pt))
    test = Archive(stream_archives[2])  # logmel, fmllr, ivector: logmel is columns 0-14 there
    assert [e["name"] for e in test.layout] == ["logmel", "fmllr", "ivector"]
    scorer = ModelScorer(final_pt, test.path, 5)
    assert scorer.input.columns == tuple(range(15))
    for utt, first, count, frames in test.utterances:
        feats, _ = test.read_chunks(first, first + count)
        with torch.inference_mode():
            logits = final.model(torch.from_numpy(feats[..., :15].astype(np.float32)))
        by_hand = (torch.log_softmax(logits, -1).reshape(-1, 5)[:frames] - prior).numpy()
        np.testing.assert_array_equal(scorer(utt), by_hand)


def test_a_missing_or_unknown_stream_is_one_error(stream_archives, learnable_archives, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        train(_cfg(stream_archives, tmp_path / "a", streams="logmel,mfcc"))
    assert str(info.value) == (f"{stream_archives[0]}: --streams: no stream 'mfcc' in this archive "
                               "(its streams: fmllr, ivector, logmel)")
    with pytest.raises(InputError) as info:  # a held-out archive without them
        train(_cfg(stream_archives, tmp_path / "b", valid=learnable_archives[1]))
    assert str(info.value) == (f"{learnable_archives[1]}: the model reads stream 'logmel', which this "
                               "held-out archive does not have (its streams: feats)")
    train(_cfg(stream_archives, tmp_path / "c", valid=None))
    with pytest.raises(InputError) as info:  # decoding an archive without them
        ModelScorer(tmp_path / "c" / "final.pt", learnable_archives[1], None)
    assert str(info.value) == (f"{learnable_archives[1]}: the model reads stream 'logmel', which this "
                               "decoding archive does not have (its streams: feats)")


def test_resume_keeps_the_streams_and_refuses_others(stream_archives, tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    train(_cfg(stream_archives, exp))
    for other, asked in (("fmllr,logmel", "fmllr+logmel (19 of 22 columns)"),
                         (None, "the whole input (22 of 22 columns)")):
        with pytest.raises(ConfigError) as info:
            train(_cfg(stream_archives, exp, epochs=2, streams=other))
        assert str(info.value) == (f"{exp / 'checkpoints' / 'epoch-1'}: the checkpoint was trained on logmel "
                                   f"(15 of 22 columns), this run asks for {asked} (--streams); use a new "
                                   "EXP or --no-resume")
    assert train(_cfg(stream_archives, exp, epochs=2)).start_epoch == 2


def test_command_line(stream_archives, learnable_archives, tmp_path: Path) -> None:
    def run(*args: str, archive: Path = stream_archives[0]):
        return CliRunner().invoke(cli, ["train", str(archive), str(tmp_path / "exp"), "--epochs", "1",
                                        "--batch", "16", "--threads", "1", "--hidden", "8", "--layers", "1",
                                        *args])

    res = run("--streams", "logmel", "--spec-augment", "F=1,f=2,T=1,t=3", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "logmel (15 of 22 columns)" in res.output and "F=1,f=2,T=1,t=3 per chunk" in res.output
    assert "22 -> 5" not in res.output and "15 -> 5" in res.output
    for args, needle in ((("--streams", "mfcc"), "--streams: no stream 'mfcc' in this archive (its "
                                                 "streams: fmllr, ivector, logmel)"),
                         (("--streams", "fmllr", "--spec-augment", "on"), "--streams leaves out")):
        res = run(*args)
        lines = [ln for ln in res.output.splitlines() if ln.startswith("Error:")]
        assert res.exit_code == 1 and len(lines) == 1 and needle in lines[0], res.output
    res = run("--spec-augment", "on", archive=learnable_archives[0])
    assert res.exit_code == 1 and "has none (its streams: feats)" in res.output, res.output
    for args in (("--streams", "a,,b"), ("--spec-augment", "F=x")):  # malformed: usage errors
        res = run(*args)
        assert res.exit_code == 2 and "Invalid value for" in res.output, res.output
    res = run("--streams", "logmel", "--spec-augment", "F=1,f=2,T=1,t=3")
    assert res.exit_code == 0, res.output
    assert load_final(tmp_path / "exp" / "final.pt").meta["input"]["streams"] == ["logmel"]
