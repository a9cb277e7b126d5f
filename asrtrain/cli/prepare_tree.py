"""``asrtrain prepare tree``: a question tree of the network's size from the aligner's last rung."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import resolved_params


@click.command()
@click.argument("ali_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--leaves", type=click.IntRange(2), required=True,
              help="About how many pdfs (tree leaves) the network's tree has.")
@click.option("--nj", type=click.IntRange(1), default=1, show_default=True,
              help="Jobs (processes) for the realignment, the training speakers split among them.")
@click.pass_context
def tree(ctx: click.Context, ali_dir: Path, out: Path, leaves: int, nj: int) -> None:
    """OUT: a tree of about --leaves pdfs grown by Kaldi's likelihood questions on the last
    rung of ALI_DIR (prepare align's output: its training split realigned by that rung, with
    its own features and, for SAT, the training speakers' transforms), written as a rung file
    that `prepare lang --tree OUT` reads (Kaldi's nnet3/chain/build_tree.sh). The aligner's
    tree is sized for Gaussians; a network's softmax can take more leaves. Logs go to OUT's
    parent's log/."""
    from asrtrain.align.network_tree import grow_network_tree
    from asrtrain.core.runlog import command_run

    with command_run("prepare-tree", out.parent, resolved_params(ctx), lock=out,
                     config_name=f"{out.stem}.config.yaml",
                     fingerprint_name=f"{out.stem}.fingerprint.json"):
        figures = grow_network_tree(ali_dir, leaves, out, nj)
    lost = sum(figures["lost"].values())
    click.echo(f"{out}: {figures['pdfs']} pdfs on the {figures['rung']} rung's alignments of "
               f"{figures['aligned']} utterances" + (f" ({lost} not aligned)" if lost else ""))
