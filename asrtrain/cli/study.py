"""``asrtrain study batch|hierarchy|topology``: the papers' claims, measured with simulated learners."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from asrtrain.cli.options import default_of
from asrtrain.model.config import ModelConfig
from asrtrain.train.config import TrainConfig
from asrtrain.train.schedule import WARMUP_GRANULARITIES

_ARCHIVE = click.Path(exists=True, dir_okay=False, path_type=Path)


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected integers separated by commas") from None
    if not values or min(values) < 1:
        raise click.BadParameter(f"{text!r}: expected positive integers")
    return values


def training_options(func: Any) -> Any:
    """The options of the runs a study trains (the recipe of ``asrtrain train``, smaller defaults)."""
    options = [
        click.option("--epochs", type=click.IntRange(1), default=6, show_default=True),
        click.option("--base-batch", type=click.IntRange(1), default=default_of(TrainConfig, "base_batch"),
                     show_default=True, help="The batch the base rate is given for (and the baseline's)."),
        click.option("--lr", type=click.FloatRange(min=0), default=default_of(TrainConfig, "lr"), show_default=True),
        click.option("--warmup-epochs", type=click.IntRange(0), default=2, show_default=True),
        click.option("--warmup-granularity", type=click.Choice(WARMUP_GRANULARITIES), default="step",
                     show_default=True, help="Raise the rate once per epoch or at every step."),
        click.option("--hidden", type=click.IntRange(1), default=160, show_default=True),
        click.option("--layers", type=click.IntRange(1), default=3, show_default=True),
        click.option("--proj", type=click.IntRange(0), default=80, show_default=True),
        click.option("--seed", type=int, default=0, show_default=True),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """The study's directory, held against a second study writing into it (:mod:`asrtrain.core.lock`)."""
    import logging

    from asrtrain.core.lock import hold

    with hold(out) as held:
        note = held.take_note()
        if note:
            logging.getLogger("asrtrain.study").warning("%s", note)
        yield


def base_config(archive: Path, valid: Path, out: Path, batch: int, kw: dict[str, Any]) -> TrainConfig:
    model = ModelConfig(hidden=kw["hidden"], layers=kw["layers"], proj=kw["proj"])
    return TrainConfig(archive=archive, valid=valid, exp=out, epochs=kw["epochs"], batch=batch,
                       base_batch=kw["base_batch"], lr=kw["lr"], warmup_epochs=kw["warmup_epochs"],
                       warmup_granularity=kw["warmup_granularity"], model=model,
                       seed=kw["seed"], log_every=10_000)


@click.group()
def study() -> None:
    """Measure the papers' claims with learners simulated in one process (see asrtrain/study/)."""


@study.command("batch")
@click.argument("archive", type=_ARCHIVE)
@click.argument("valid", type=_ARCHIVE)
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--learners", type=click.IntRange(1), default=16, show_default=True)
@click.option("--batches", default="256,1024,2048,4096,8192", show_default=True,
              help="Total batches (chunks per step) to try, each a multiple of --learners.")
@click.option("--margin", type=click.FloatRange(0), default=0.02, show_default=True,
              help="A batch converges when its best held-out loss is within this fraction of the baseline's.")
@training_options
def batch_cmd(archive: Path, valid: Path, out: Path, learners: int, batches: str, margin: float, **kw: Any) -> None:
    """SSGD and ADPSGD at growing batches against one learner at the base batch (INTERSPEECH 2019, Fig. 2)."""
    from asrtrain.study.studies import batch_study

    with _locked(out):
        record = batch_study(base_config(archive, valid, out, kw["base_batch"], kw), out, learners, _ints(batches),
                             margin)
    click.echo(f"{out}/batch.md: largest batch within {100 * margin:g}% of one learner: "
               f"SSGD {record['largest']['ssgd']}, ADPSGD {record['largest']['adpsgd']}")


@study.command("hierarchy")
@click.argument("archive", type=_ARCHIVE)
@click.argument("valid", type=_ARCHIVE)
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--learners", type=click.IntRange(1), default=16, show_default=True)
@click.option("--group", type=click.IntRange(1), default=4, show_default=True, help="Learners per super-learner.")
@click.option("--batch", type=click.IntRange(1), default=1024, show_default=True)
@training_options
def hierarchy_cmd(archive: Path, valid: Path, out: Path, learners: int, group: int, batch: int, **kw: Any) -> None:
    """H-ADPSGD over LEARNERS in super-learners of GROUP against ADPSGD over LEARNERS/GROUP (section 4)."""
    from asrtrain.study.studies import hierarchy_study

    with _locked(out):
        record = hierarchy_study(base_config(archive, valid, out, batch, kw), out, learners, group)
    click.echo(f"{out}/hierarchy.md: " + ", ".join(f"{r['name']} {r['best_valid_loss']:.4f}" for r in record["runs"]))


@study.command("topology")
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--sizes", default="4,8,16,32,64,128", show_default=True, help="Learner counts of the consensus table.")
@click.option("--archive", type=_ARCHIVE, default=None, help="With --valid: also train the ring variants.")
@click.option("--valid", type=_ARCHIVE, default=None)
@click.option("--learners", type=click.IntRange(2), default=16, show_default=True)
@click.option("--batch", type=click.IntRange(1), default=4096, show_default=True)
@training_options
def topology_cmd(out: Path, sizes: str, archive: Path | None, valid: Path | None, learners: int, batch: int,
                 **kw: Any) -> None:
    """Consensus rate against the spectral gap; ring variants and delay-by-one at a large batch (ICASSP 2020)."""
    from asrtrain.study.studies import topology_study

    if (archive is None) != (valid is None):
        raise click.UsageError("give both --archive and --valid, or neither")
    base = base_config(archive, valid, out, batch, kw) if archive is not None and valid is not None else None
    with _locked(out):
        topology_study(base, out, _ints(sizes), learners)
    click.echo(f"wrote {out}/topology.md")
