"""``asrtrain export``: a trained model as one self-contained, versioned directory."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import POSITIVE, Finite, config_option


@click.command()
@config_option
@click.argument("exp", type=click.Path(exists=True, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--graph", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The graph dir (prepare lang's lang/graph) [the one beside the alignments "
                   "the model was trained on].")
@click.option("--pick-on", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A scored dev decode whose best_wer names the LM weight and penalty, and whose "
                   "search settings are kept [EXP/decode_dev].")
@click.option("--lmwt", type=POSITIVE, default=None, help="LM weight, instead of the dev pick.")
@click.option("--wip", type=Finite(), default=None, help="Word insertion penalty, instead of the dev pick.")
@click.option("--beam", type=POSITIVE, default=None, help="Search beam [the dev decode's, else 13].")
@click.option("--max-active", type=click.IntRange(1), default=None,
              help="Most active states per frame [the dev decode's, else 7000].")
@click.option("--lattice-beam", type=POSITIVE, default=None,
              help="Lattice beam (confidences) [the dev decode's, else 8].")
@click.option("--first-pass", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A network reading SAT fMLLR features: the SAT model's decode --first-pass "
                   "dir (a recipe's exp/gmm/decode_sat_dev) whose first pass (the LDA+MLLT "
                   "model, its graph and search) transcribe runs again [the one the held-out "
                   "archive's records lead to].")
@click.option("--first-pass-lmwt", type=POSITIVE, default=None,
              help="LM weight of the first pass's best paths [the SAT decode's].")
@click.option("--ensemble", type=click.Path(exists=True, path_type=Path), multiple=True,
              help="Another network decoded with EXP's as one (final.pt or its training dir; "
                   "repeatable; the same tree and input): transcribe averages their scores, as "
                   "decode --ensemble does. Pick the setting on the ensemble's dev decode "
                   "(--pick-on).")
def export(exp: Path, out: Path, graph: Path | None, pick_on: Path | None, lmwt: float | None,
           wip: float | None, beam: float | None, max_active: int | None,
           lattice_beam: float | None, first_pass: Path | None, first_pass_lmwt: float | None,
           ensemble: tuple[Path, ...], config: str | None) -> None:
    """Write OUT, a model directory that `asrtrain transcribe` and `Transcriber` load: the
    network of EXP (a training dir with final.pt, or a recipe's exp with blstm/final.pt),
    its graph, the front end (features, CMVN, i-vector extractor, fMLLR model, the SAT
    model's GMM first pass) as the training run made it, the LM weight and insertion penalty picked on dev, and a
    manifest with versions and sha256 checksums (its record of the run: OUT is written
    whole or not at all, so no log is kept inside it)."""
    from asrtrain.transcribe.export import export_model

    data = export_model(exp, out, graph=graph, pick_on=pick_on, lmwt=lmwt, wip=wip,
                        search={"beam": beam, "max_active": max_active,
                                "lattice_beam": lattice_beam},
                        first_pass=first_pass, first_pass_lmwt=first_pass_lmwt,
                        ensemble=list(ensemble))
    click.echo(f"{out}: {len(data['files'])} files, manifest.json with their sha256")
