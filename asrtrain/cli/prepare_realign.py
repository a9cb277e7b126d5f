"""``asrtrain prepare realign``: the training transcripts aligned by the trained network."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import resolved_params


def _archives(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
              ) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for spec in value:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{spec!r}: expected SPLIT=ARCHIVE (train=data/archives/train.h5)")
        if not Path(path).is_file():
            raise click.BadParameter(f"{path}: no such archive")
        out[name] = Path(path)
    return out


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("lang_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("ali_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--archive", "archives", multiple=True, required=True, callback=_archives,
              help="SPLIT=ARCHIVE: a split of ALI_DIR and the HDF5 archive the network reads "
                   "its frames from (repeat: train=…/train.h5 --archive dev=…/dev.h5).")
@click.option("--max-lost", type=click.FloatRange(0, 1), default=0.05, show_default=True,
              help="Refuse a split when more than this share of its utterances has no path.")
@click.option("--nj", type=click.IntRange(1), default=1, show_default=True,
              help="Local processes, one core each, over contiguous shares of equal frames "
                   "(the same alignments as --nj 1).")
@click.pass_context
def realign(ctx: click.Context, model: Path, lang_dir: Path, ali_dir: Path, out: Path,
            archives: dict[str, Path], max_lost: float, nj: int) -> None:
    """OUT: an alignment dir (as prepare align writes) of each --archive split's transcripts,
    aligned by MODEL (a final.pt) on LANG_DIR's tree, the tree its archive's targets came from
    (Kaldi's nnet3/align.sh). ALI_DIR (prepare align's output) gives the transcripts, the
    lexicon and phones.txt. Give OUT to prepare lang (with --tree, the same tree) to train the
    next network on these targets. Logs go to OUT/log/."""
    from asrtrain.align.network_align import network_align
    from asrtrain.core.runlog import command_run

    with command_run("prepare-realign", out, resolved_params(ctx)):
        figures = network_align(model, lang_dir, ali_dir, archives, out, max_lost=max_lost,
                                nj=nj)
    for name, fig in figures.items():
        lost = sum(fig["lost"].values())
        click.echo(f"{out / name}: {fig['aligned']} utterances aligned by the network"
                   + (f" ({lost} lost)" if lost else "")
                   + f", {100 * fig['phone_agreement']:.1f}% of {fig['frames']} frames on the "
                     "ladder's phone")
