"""``asrtrain prepare den-graph``: the denominator graph of lattice-free MMI (``train-seq``)."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import resolved_params


@click.command("den-graph")
@click.argument("lang_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("ali_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--targets", type=click.Choice(["auto", "states", "even"]), default="auto",
              show_default=True, help="Where phones split into HMM states (as prepare lang's).")
@click.pass_context
def den_graph(ctx: click.Context, lang_dir: Path, ali_dir: Path, out: Path, targets: str) -> None:
    """OUT (.npz): the phone trigrams of ALI_DIR's training alignments expanded to LANG_DIR's
    context-dependent HMM states, pdfs and transition probabilities (Kaldi's chain den.fst).
    `asrtrain train-seq MODEL ARCHIVE OUT ...` trains with lattice-free MMI against it, no
    decoding of the training set needed. LANG_DIR must be the lang whose targets ARCHIVE holds."""
    from asrtrain.core.runlog import command_run
    from asrtrain.train.den_graph import make_den_graph

    with command_run("prepare-den-graph", out.parent, resolved_params(ctx), lock=out,
                     config_name=f"{out.stem}.config.yaml",
                     fingerprint_name=f"{out.stem}.fingerprint.json"):
        graph = make_den_graph(lang_dir, ali_dir, out, targets)
    click.echo(f"{out}: {graph.num_states} states, {graph.src.size} transitions, "
               f"{len(set(graph.pdf.tolist()))} pdfs")
