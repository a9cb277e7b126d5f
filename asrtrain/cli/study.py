"""``asrtrain study batch|lr-range|hierarchy|topology``: the papers' claims, measured with simulated learners.

Every study that trains is resumable: run the same command again on the same OUT after a
stop (Ctrl-C, SIGTERM: a checkpoint, exit 75) or a kill, and it goes on where it was
(:mod:`asrtrain.study.runs`). Options that cannot work are refused before anything runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from asrtrain.cli.options import default_of, resolved_params
from asrtrain.model.config import ModelConfig
from asrtrain.train.config import WARMUP_GRANULARITIES, TrainConfig

_ARCHIVE = click.Path(exists=True, dir_okay=False, path_type=Path)
_OUT = click.Path(file_okay=False, path_type=Path)


def _numbers(text: str, kind: type, low: float, need: str) -> list:
    """Comma-separated ``kind`` values of at least ``low``; ``need`` names them in the error."""
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        plural = "integers" if kind is int else "numbers"
        raise click.BadParameter(f"{text!r}: expected {plural} separated by commas") from None
    if not values or min(values) < low:
        raise click.BadParameter(f"{text!r}: expected {need}")
    return values


def _ints(text: str) -> list[int]:
    return _numbers(text, int, 1, "positive integers")


def _floats(text: str) -> list[float]:
    return _numbers(text, float, 0, "numbers >= 0")


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _options(func: Any, options: list[Any]) -> Any:
    for option in reversed(options):
        func = option(func)
    return func


def training_options(func: Any) -> Any:
    """The options of the runs a study trains (the recipe of ``asrtrain train``, smaller defaults)."""
    return _options(func, [
        click.option("--epochs", type=click.IntRange(1), default=6, show_default=True),
        click.option("--warmup-epochs", type=click.IntRange(0), default=2, show_default=True),
        click.option("--warmup-granularity", type=click.Choice(WARMUP_GRANULARITIES), default="step",
                     show_default=True, help="Raise the rate once per epoch or at every step."),
        *model_options([]),
    ])


def model_only_options(func: Any) -> Any:
    """The model, rate and optimizer options without an epoch recipe (the range test has its own)."""
    return _options(func, model_options([]))


def model_options(extra: list[Any]) -> list[Any]:
    """The model, the base rate and the optimizer's options (shared by every study that trains)."""
    return [
        click.option("--base-batch", type=click.IntRange(1), default=default_of(TrainConfig, "base_batch"),
                     show_default=True, help="The batch the base rate is given for (and the baseline's)."),
        click.option("--lr", type=click.FloatRange(min=0), default=default_of(TrainConfig, "lr"), show_default=True,
                     help="Base rate at --base-batch (linear scaling above it)."),
        click.option("--momentum", type=click.FloatRange(0, 1, max_open=True), default=default_of(TrainConfig, "momentum"),
                     show_default=True),
        click.option("--clip", type=click.FloatRange(min=0), default=default_of(TrainConfig, "clip"), show_default=True,
                     help="Largest gradient norm (0: no clipping)."),
        click.option("--hidden", type=click.IntRange(1), default=160, show_default=True),
        click.option("--layers", type=click.IntRange(1), default=3, show_default=True),
        click.option("--proj", type=click.IntRange(0), default=80, show_default=True),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--threads", type=click.IntRange(1), default=None, help="torch threads (default: torch's)."),
        *extra,
    ]


def run_options(func: Any) -> Any:
    """How a study's runs are kept, probed and checked."""
    return _options(func, [
        click.option("--global-average/--no-global-average", default=True, show_default=True,
                     help="Set every learner to the learners' mean at each epoch's end (the real job's "
                          "--global-average). Without it the spread carries over epochs; the held-out loss is "
                          "the learners' mean's either way."),
        click.option("--spread-every", type=click.IntRange(0), default=10, show_default=True,
                     help="Record the learners' RMS spread every N steps (0: never)."),
        click.option("--sharpness-every", type=click.IntRange(0), default=0, show_default=True,
                     help="Record the largest Hessian eigenvalue of the learners' mean every N steps (0: never)."),
        click.option("--sharpness-chunks", type=click.IntRange(1), default=64, show_default=True,
                     help="Held-out chunks of the Hessian's batch."),
        click.option("--save-every", type=click.FloatRange(min=0, min_open=True), default=10.0, show_default=True,
                     help="Minutes between mid-epoch checkpoints (a kill loses at most this much)."),
        click.option("--min-steps", type=click.IntRange(0), default=100, show_default=True,
                     help="Steps an epoch the largest batch must take on the archive (0: no check)."),
        click.option("--dry-run", is_flag=True, help="Check the options, print the runs, train nothing."),
    ])


def base_config(archive: Path, valid: Path, out: Path, batch: int, kw: dict[str, Any]) -> TrainConfig:
    model = ModelConfig(hidden=kw["hidden"], layers=kw["layers"], proj=kw["proj"])
    return TrainConfig(archive=archive, valid=valid, exp=out, epochs=kw.get("epochs", 1), batch=batch,
                       base_batch=kw["base_batch"], lr=kw["lr"], warmup_epochs=kw.get("warmup_epochs", 0),
                       warmup_granularity=kw.get("warmup_granularity", "step"), model=model, momentum=kw["momentum"],
                       clip=kw["clip"], seed=kw["seed"], log_every=max(kw.get("spread_every") or 10, 1),
                       num_threads=kw.get("threads"))


def _probes(kw: dict[str, Any]) -> Any:
    from asrtrain.study.probes import ProbeConfig

    return ProbeConfig(spread_every=kw["spread_every"], sharpness_every=kw["sharpness_every"],
                       sharpness_chunks=kw["sharpness_chunks"])


@contextlib.contextmanager
def _session(name: str, out: Path, ctx: click.Context) -> Iterator[None]:
    """The study's log in OUT/log, and SIGTERM/SIGUSR1/Ctrl-C as a checkpoint and a stop."""
    from asrtrain.core.runlog import command_run
    from asrtrain.distributed import signals

    with command_run(name, out, resolved_params(ctx)), signals.caught():
        yield


def _dry_run(specs: list[Any], runner: Any) -> None:
    from asrtrain.study.runs import describe

    total = 0
    for spec in specs:
        done = runner.record(spec) is not None
        chunks = 0 if done else runner.total_chunks(spec) - runner.chunks_done(spec)
        total += chunks
        click.echo(f"{spec.name}: {describe(spec, runner.chunks)}" + (" (done)" if done else f", {chunks} chunks to train"))
    click.echo(f"{len(specs)} runs, {total} chunks to train ({total / max(runner.chunks, 1):.3g} epochs of the archive)")


@click.group()
def study() -> None:
    """Measure the papers' claims with learners simulated in one process (see asrtrain/study/)."""


@study.command("batch")
@click.argument("archive", type=_ARCHIVE)
@click.argument("valid", type=_ARCHIVE)
@click.argument("out", type=_OUT)
@click.option("--learners", type=click.IntRange(1), default=16, show_default=True)
@click.option("--batches", default="256,1024,2048,4096,8192", show_default=True,
              help="Total batches (chunks per step) to try, each a multiple of --learners (the baseline: SSGD at "
                   "--base-batch).")
@click.option("--rate-multipliers", default="0.5,1,2,4", show_default=True,
              help="Peak rates tried at every batch: these × the linear-scaling rule.")
@click.option("--strategies", default="ssgd,adpsgd", show_default=True, help="Of ssgd, adpsgd, h-adpsgd.")
@click.option("--group", type=click.IntRange(1), default=4, show_default=True, help="H-ADPSGD: learners per super-learner.")
@click.option("--margin", type=click.FloatRange(0), default=0.02, show_default=True,
              help="A batch converges when its best held-out loss is within this fraction of the baseline's.")
@click.option("--runs", "only", default=None, metavar="GLOB",
              help="Train only the runs of the grid whose names match (e.g. 'adpsgd-512-*': another machine or "
                   "core takes the rest, their run directories copied into OUT/runs later); the report covers "
                   "every run of the grid finished so far.")
@training_options
@run_options
@click.pass_context
def batch_cmd(ctx: click.Context, archive: Path, valid: Path, out: Path, learners: int, batches: str,
              rate_multipliers: str, strategies: str, group: int, margin: float, only: str | None,
              **kw: Any) -> None:
    """SSGD and ADPSGD at growing batches and a grid of rates, against one learner at the base batch
    (INTERSPEECH 2019, Fig. 2). Resumable: run it again to go on."""
    from asrtrain.study.batch import BatchGrid, batch_specs, batch_study
    from asrtrain.study.checks import check_multipliers, check_study
    from asrtrain.study.runs import Runner, select_runs

    names, sizes, mults = _names(strategies), _ints(batches), _floats(rate_multipliers)
    check_multipliers(mults)
    chunks, pdfs = check_study(archive, names, sizes, learners, group, kw["min_steps"])
    grid = BatchGrid(tuple(names), tuple(sizes), tuple(mults), learners, group, margin, kw["global_average"])
    base = base_config(archive, valid, out, kw["base_batch"], kw)
    runner = Runner(out, chunks, kw["save_every"])
    if kw["dry_run"]:
        _dry_run(select_runs(batch_specs(base, grid, _probes(kw)), only), runner)
        return
    with _session("study-batch", out, ctx):
        record = batch_study(base, out, grid, _probes(kw), runner, pdfs, only)
    if record is None:
        click.echo(f"{out}: no baseline run ({base.base_batch} chunks) finished yet: the report waits for one")
        return
    missing = f" ({record['missing']} run(s) of the grid not finished)" if record.get("missing") else ""
    click.echo(f"{out}/batch.md{missing}: largest batch within {100 * margin:g}% of one learner: " +
               ", ".join(f"{s.upper()} {'none' if b is None else b}" for s, b in record["largest_batch"].items()))


@study.command("lr-range")
@click.argument("archive", type=_ARCHIVE)
@click.argument("valid", type=_ARCHIVE)
@click.argument("out", type=_OUT)
@click.option("--learners", type=click.IntRange(1), default=16, show_default=True)
@click.option("--batch", type=click.IntRange(1), default=4096, show_default=True, help="The one large batch.")
@click.option("--strategies", default="ssgd,adpsgd", show_default=True, help="Of ssgd, adpsgd, h-adpsgd.")
@click.option("--group", type=click.IntRange(1), default=4, show_default=True, help="H-ADPSGD: learners per super-learner.")
@click.option("--start", "start_mult", type=click.FloatRange(min=0, min_open=True), default=0.25, show_default=True,
              help="The first rate, × the linear-scaling rule (--lr × batch/--base-batch).")
@click.option("--factor", type=click.FloatRange(min=1, min_open=True), default=2.0, show_default=True,
              help="The rate grows by this factor every --every steps.")
@click.option("--every", type=click.IntRange(1), default=20, show_default=True)
@click.option("--rungs", type=click.IntRange(1), default=10, show_default=True, help="Rates on the ladder.")
@click.option("--clips", default="5,0", show_default=True, help="Gradient clipping norms to run (0: off).")
@click.option("--seeds", default="0,1", show_default=True)
@click.option("--held-out-chunks", type=click.IntRange(1), default=512, show_default=True,
              help="The fixed held-out subset evaluated after each rate.")
@click.option("--blow-up", type=click.FloatRange(min=1, min_open=True), default=2.0, show_default=True,
              help="A held-out loss above this × the best so far (or the untrained model's) ends the run.")
@model_only_options
@run_options
@click.pass_context
def lr_range_cmd(ctx: click.Context, archive: Path, valid: Path, out: Path, learners: int, batch: int,
                 strategies: str, group: int, start_mult: float, factor: float, every: int, rungs: int, clips: str,
                 seeds: str, held_out_chunks: int, blow_up: float, **kw: Any) -> None:
    """The rate doubling every N steps until the held-out loss blows up, SSGD against ADPSGD at one large
    batch, clipping on and off, several seeds (arXiv 2112.01433). Resumable: run it again to go on."""
    from asrtrain.study.checks import check_study
    from asrtrain.study.lr_range import RangeConfig, lr_range_study, range_specs
    from asrtrain.study.runs import Runner

    names, clip_values, seed_values = _names(strategies), _floats(clips), [int(s) for s in _floats(seeds)]
    chunks, _ = check_study(archive, names, [batch], learners, group, kw["min_steps"])
    base = base_config(archive, valid, out, batch, kw)
    rng = RangeConfig(start_lr=start_mult * kw["lr"] * batch / kw["base_batch"], factor=factor, every=every,
                      rungs=rungs, held_chunks=held_out_chunks, blow_up=blow_up)
    runner = Runner(out, chunks, kw["save_every"])
    args = (rng, names, learners, clip_values, seed_values)
    if kw["dry_run"]:
        _dry_run(range_specs(base, *args, chunks, kw["global_average"], group, _probes(kw)), runner)
        return
    with _session("study-lr-range", out, ctx):
        record = lr_range_study(base, out, *args, runner, kw["global_average"], group, _probes(kw))
    from asrtrain.study.lr_range import verdicts

    click.echo(f"{out}/lr-range.md: " + "; ".join(verdicts(record["table"], clip_values)))


@study.command("hierarchy")
@click.argument("archive", type=_ARCHIVE)
@click.argument("valid", type=_ARCHIVE)
@click.argument("out", type=_OUT)
@click.option("--learners", type=click.IntRange(1), default=16, show_default=True)
@click.option("--group", type=click.IntRange(1), default=4, show_default=True, help="Learners per super-learner.")
@click.option("--batch", type=click.IntRange(1), default=1024, show_default=True)
@training_options
@run_options
@click.pass_context
def hierarchy_cmd(ctx: click.Context, archive: Path, valid: Path, out: Path, learners: int, group: int, batch: int,
                  **kw: Any) -> None:
    """H-ADPSGD over LEARNERS in super-learners of GROUP against ADPSGD over LEARNERS/GROUP (section 4)."""
    from asrtrain.study.checks import check_study
    from asrtrain.study.runs import Runner
    from asrtrain.study.studies import hierarchy_study

    chunks, _ = check_study(archive, ["h-adpsgd"], [batch], learners, group, kw["min_steps"])
    check_study(archive, ["adpsgd"], [batch], learners // group, 1, 0)
    if kw["dry_run"]:
        click.echo(f"h-adpsgd-{learners}x{group} and adpsgd-{learners // group} at batch {batch}: "
                   f"{chunks // batch} steps an epoch")
        return
    with _session("study-hierarchy", out, ctx):
        record = hierarchy_study(base_config(archive, valid, out, batch, kw), out, learners, group,
                                 Runner(out, chunks, kw["save_every"]), _probes(kw), kw["global_average"])
    click.echo(f"{out}/hierarchy.md: " + ", ".join(f"{r['name']} {r['best_valid_loss']:.4f}" for r in record["runs"]))


@study.command("topology")
@click.argument("out", type=_OUT)
@click.option("--sizes", default="4,8,16,32,64,128", show_default=True, help="Learner counts of the consensus table.")
@click.option("--archive", type=_ARCHIVE, default=None, help="With --valid: also train the ring variants.")
@click.option("--valid", type=_ARCHIVE, default=None)
@click.option("--learners", type=click.IntRange(2), default=16, show_default=True)
@click.option("--batch", type=click.IntRange(1), default=4096, show_default=True)
@training_options
@run_options
@click.pass_context
def topology_cmd(ctx: click.Context, out: Path, sizes: str, archive: Path | None, valid: Path | None, learners: int,
                 batch: int, **kw: Any) -> None:
    """Consensus rate against the spectral gap; ring variants and delay-by-one at a large batch (ICASSP 2020)."""
    from asrtrain.study.checks import check_study
    from asrtrain.study.runs import Runner
    from asrtrain.study.studies import topology_study

    if (archive is None) != (valid is None):
        raise click.UsageError("give both --archive and --valid, or neither")
    base, runner = None, None
    if archive is not None and valid is not None:
        chunks, _ = check_study(archive, ["adpsgd"], [batch], learners, 1, kw["min_steps"])
        base, runner = base_config(archive, valid, out, batch, kw), Runner(out, chunks, kw["save_every"])
    if kw["dry_run"]:
        click.echo(f"consensus table at {sizes} learners" + ("" if base is None else f"; 4 ring variants at batch {batch}"))
        return
    with _session("study-topology", out, ctx):
        topology_study(base, out, _ints(sizes), learners, runner, _probes(kw), kw["global_average"])
    click.echo(f"wrote {out}/topology.md")
