"""``asrtrain train-seq``: sequence training (MMI) of a cross-entropy model on its lattices or
a denominator graph (lattice-free)."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import POSITIVE, config_option
from asrtrain.train.sequence_config import SequenceConfig

_D = SequenceConfig()


@click.command("train-seq")
@config_option
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("archive", type=click.Path(exists=True, path_type=Path))
@click.argument("lattices", metavar="DENOMINATOR", type=click.Path(exists=True, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--valid", type=click.Path(exists=True, path_type=Path),
              help="Held-out archive: its frame loss and accuracy after each epoch.")
@click.option("--acwt", type=POSITIVE, default=_D.acwt, show_default=True,
              help="Acoustic scale of the lattice's paths (κ).")
@click.option("--lr", type=POSITIVE, default=_D.lr, show_default=True,
              help="SGD rate per frame of a step.")
@click.option("--momentum", type=click.FloatRange(0, 1, max_open=True), default=_D.momentum, show_default=True,
              help="SGD momentum.")
@click.option("--epochs", type=click.IntRange(1), default=_D.epochs, show_default=True,
              help="Passes over the utterances that have a lattice.")
@click.option("--ce-weight", type=click.FloatRange(0), default=_D.ce_weight, show_default=True,
              help="Share of the frame cross-entropy added to the MMI loss (frame smoothing).")
@click.option("--utts-per-step", type=click.IntRange(1), default=_D.utts_per_step, show_default=True,
              help="Whole utterances whose summed loss makes one step (divided by their frames).")
@click.option("--drop-frames/--keep-frames", default=_D.drop_frames, show_default=True,
              help="Leave out frames whose reference pdf the lattice never visits (Kaldi's --drop-frames).")
@click.option("--seed", type=int, default=_D.seed, show_default=True, help="Order of the utterances (and the weights, --from-scratch).")
@click.option("--max-utts", type=click.IntRange(1), default=None, help="Only N utterances of each epoch's shuffled order (a quick look).")
@click.option("--diagnostic-utts", type=click.IntRange(1), default=_D.diagnostic_utts, show_default=True,
              help="The objective is measured on a fixed sample of N utterances, before training and after each epoch.")
@click.option("--from-scratch", is_flag=True, default=_D.from_scratch,
              help="Draw MODEL's weights afresh (seeded by --seed) and train with MMI from there, chain's "
                   "way; MODEL gives the shape, the input streams and the priors.")
@click.option("--final-lr", type=POSITIVE, default=None,
              help="Decay the rate by a constant factor each epoch, from --lr to this at the last.")
@click.option("--clip", type=POSITIVE, default=None, help="Clip the summed gradient's norm to this.")
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Continue after the last whole epoch of a run killed in OUT (OUT/state.pt).")
@click.option("--nproc", type=click.IntRange(1), default=1, show_default=True,
              help="Local learners (SSGD: each takes a share of every step's utterances); under torchrun, "
                   "mpiexec or srun the launcher's ranks are the learners.")
@click.option("--device", default=None, help="torch device of the network [cuda when there is one].")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch CPU threads [the cores this process may use].")
@click.pass_context
def train_seq(ctx: click.Context, model: Path, archive: Path, lattices: Path, out: Path, valid: Path | None,
              resume: bool, nproc: int, device: str | None, threads: int | None, config: str | None,
              **options: object) -> None:
    """Train MODEL (a cross-entropy final.pt) further with MMI: ARCHIVE is its training archive
    (the reference pdfs are its targets), DENOMINATOR the decode dir (or its lat/) of
    `asrtrain decode MODEL GRAPH ARCHIVE DIR --lattices`, or a graph file of `asrtrain prepare
    den-graph` (lattice-free MMI: every path of a phone trigram, no decoding needed). Writes
    OUT/epoch<N>.pt, OUT/final.pt (the last epoch; decode it as any final.pt) and
    OUT/history.json."""
    import torch

    from asrtrain.cli.options import resolved_params
    from asrtrain.core.runlog import command_run
    from asrtrain.distributed.launch import detect, set_threads
    from asrtrain.train.sequence import run

    set_threads(1) if threads is None else torch.set_num_threads(threads)
    cfg = SequenceConfig(**options)  # type: ignore[arg-type]
    args = (model, archive, lattices, out, cfg, valid, device, resume, threads, nproc)
    place = detect()
    if place is not None and place.rank != 0:   # other ranks of a launcher: rank 0 writes the run's files
        run(*args)
        return
    out.mkdir(parents=True, exist_ok=True)
    with command_run("train-seq", out, resolved_params(ctx)) as this_run:
        final = run(*args, main_log=this_run.log_path)
    click.echo(f"{final}: {'lattice-free ' if lattices.is_file() else ''}MMI-trained from {model}")
