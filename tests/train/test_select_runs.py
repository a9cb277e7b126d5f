"""``--select`` in real ``asrtrain train`` runs: final.pt is the picked epoch's checkpoint, or their mean."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.model.io import load_final
from asrtrain.train.metrics import epoch_rows, read_metrics


def _train(archives: tuple[Path, Path], exp: Path, *extra: str) -> None:
    args = ["train", str(archives[0]), str(exp), "--valid", str(archives[1]), "--batch", "16",
            "--base-batch", "16", "--lr", "0.3", "--warmup-epochs", "0", "--anneal", "1", "--hidden", "16",
            "--layers", "1", "--proj", "8", "--threads", "1", "--log-every", "1000", *extra]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output


def _model(exp: Path, epoch: int) -> dict[str, torch.Tensor]:
    return torch.load(exp / "checkpoints" / f"epoch-{epoch}" / "model.pt", weights_only=True)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_best_is_the_lowest_held_out_epoch_and_survives_pruning(learnable_archives: tuple[Path, Path],
                                                                 tmp_path: Path) -> None:
    """Two good epochs, then (resumed) two at an absurd rate: best (the default with --valid) is an
    early epoch, whose checkpoint --keep-checkpoints 1 must not prune."""
    exp = tmp_path / "exp"
    _train(learnable_archives, exp, "--epochs", "2", "--keep-checkpoints", "1")
    _train(learnable_archives, exp, "--epochs", "4", "--keep-checkpoints", "1", "--lr", "40")
    rows = epoch_rows(exp / "metrics.jsonl")
    losses = {r["epoch"]: r["valid_loss"] for r in rows}
    best = min(losses, key=losses.__getitem__)
    assert best <= 2 and losses[4] > 2 * losses[best], losses
    assert sorted(p.name for p in (exp / "checkpoints").iterdir()) == [f"epoch-{best}", "epoch-4"]
    final = load_final(exp / "final.pt")
    assert _same(final.model.state_dict(), _model(exp, best))
    record = {"select": "best", "epochs": [best], "valid_loss": losses[best], "valid_losses": [losses[best]],
              "epochs_done": 4, "stopped_early": False}
    assert final.meta["select"] == {k: record[k] for k in ("select", "epochs", "valid_loss", "valid_losses")}
    assert json.loads((exp / "selection.json").read_text()) == record
    selects = [r for r in read_metrics(exp / "metrics.jsonl") if r["kind"] == "select"]
    assert len(selects) == 1 and selects[0]["epochs"] == [best]  # the first run's row went on resume
    log = "".join(p.read_text() for p in (exp / "log").glob("train.*.log"))
    assert f"final model: epoch {best} of 4 (--select best, held-out loss {losses[best]:.4f})" in log


def test_average_is_the_mean_of_the_last_checkpoints(learnable_archives: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    exp = tmp_path / "exp"
    _train(learnable_archives, exp, "--epochs", "3", "--select", "average:2", "--keep-checkpoints", "1")
    assert sorted(p.name for p in (exp / "checkpoints").iterdir()) == ["epoch-2", "epoch-3"]
    two, three = _model(exp, 2), _model(exp, 3)
    got = load_final(exp / "final.pt").model.state_dict()
    for key in got:
        mean = ((two[key].double() + three[key].double()) / 2).float()
        torch.testing.assert_close(got[key], mean, rtol=0, atol=1e-7)
    assert not torch.equal(got["output.weight"], three["output.weight"])
    assert torch.equal(got["feat_mean"], three["feat_mean"])  # the fixed input normalisation, not averaged
    assert json.loads((exp / "selection.json").read_text())["epochs"] == [2, 3]
    assert load_final(exp / "final.pt").meta["select"]["select"] == "average:2"


def test_select_errors(learnable_archives: tuple[Path, Path], tmp_path: Path) -> None:
    train_h5 = str(learnable_archives[0])
    res = CliRunner().invoke(cli, ["train", train_h5, str(tmp_path / "e"), "--select", "best"])
    assert res.exit_code == 1 and "Error: --select best needs --valid" in res.output
    res = CliRunner().invoke(cli, ["train", train_h5, str(tmp_path / "e"), "--select", "avg:3"])
    assert res.exit_code == 2 and "must be last, best or average:N" in res.output
    res = CliRunner().invoke(cli, ["train", train_h5, str(tmp_path / "e"), "--lr-schedule", "plateau"])
    assert res.exit_code == 1 and "Error: --lr-schedule plateau needs --valid" in res.output
