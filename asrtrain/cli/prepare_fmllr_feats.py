"""``asrtrain prepare fmllr-feats``: a SAT rung's features (LDA+MLLT+fMLLR) of a data dir."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import resolved_params


@click.command("fmllr-feats")
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("feats_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--transforms", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Speaker transforms (a trans.scp: decode --first-pass writes one) "
                   "[the model's own, for its training speakers].")
@click.pass_context
def fmllr_feats(ctx: click.Context, model: Path, feats_dir: Path, out: Path,
                transforms: Path | None) -> None:
    """OUT/feats.scp: FEATS_DIR's MFCC through MODEL's front end (a SAT rung of prepare
    align: splice, LDA+MLLT, each speaker's fMLLR), the network's fMLLR stream as Kaldi's
    make_fmllr_feats.sh makes it. A speaker without a transform keeps the
    speaker-independent features (counted, named in the log)."""
    from asrtrain.adapt.sat_input import write_fmllr_feats
    from asrtrain.core.runlog import command_run

    with command_run("prepare-fmllr-feats", out, resolved_params(ctx)):
        figures = write_fmllr_feats(model, feats_dir, out, transforms)
    click.echo(f"{out}: {figures['utterances']} utterances of dim {figures['dim']}, "
               f"{figures['speakers_adapted']} of {figures['speakers']} speakers adapted")
