"""``asrtrain prepare gmm-graph``: a decoding graph for one rung of the aligner."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import resolved_params


@click.command("gmm-graph")
@click.argument("lang", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("model", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.pass_context
def gmm_graph(ctx: click.Context, lang: Path, model: Path, out: Path) -> None:
    """HCLG for MODEL (prepare align's models/<stage>.pt: mono, tri, lda or sat) from the
    L and G of LANG (prepare lang's output), written to OUT as a graph dir that
    `asrtrain decode MODEL OUT FEATS_DIR ...` reads (Kaldi's utils/mkgraph.sh for a GMM).
    Logs go to OUT's parent's log/."""
    from asrtrain.core.runlog import command_run
    from asrtrain.lang.gmm_graph import build_gmm_graph

    with command_run("prepare-gmm-graph", out.parent, resolved_params(ctx), lock=out,
                     config_name=f"{out.name}.config.yaml",
                     fingerprint_name=f"{out.name}.fingerprint.json"):
        figures = build_gmm_graph(lang, model, out)
    states, arcs = figures["sizes"]["HCLG"]
    click.echo(f"{out}: HCLG for the {figures['rung']} model ({figures['num_pdfs']} pdfs), "
               f"{states} states, {arcs} arcs, {figures['seconds']} s")
