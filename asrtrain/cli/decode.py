"""``asrtrain decode``: model posteriors (or oracle alignments) through HCLG to words."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import POSITIVE, config_option, resolved_params
from asrtrain.decode.grid import (
    DEFAULT_ACWT,
    DEFAULT_BEAM,
    DEFAULT_LATTICE_BEAM,
    DEFAULT_LMWT,
    DEFAULT_MAX_ACTIVE,
    DEFAULT_WIP,
)


@click.command()
@config_option
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("graph", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("data", type=click.Path(path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--nj", type=click.IntRange(1), default=2, show_default=True, help="Parallel jobs.")
@click.option("--acwt", type=POSITIVE, default=DEFAULT_ACWT, show_default=True,
              help="Acoustic scale when --lmwt is empty (one pass, named after 1/acwt).")
@click.option("--beam", type=POSITIVE, default=DEFAULT_BEAM, show_default=True, help="Decoding beam.")
@click.option("--max-active", type=click.IntRange(1), default=DEFAULT_MAX_ACTIVE, show_default=True,
              help="Most active states per frame.")
@click.option("--lmwt", default=DEFAULT_LMWT, show_default=True,
              help="LM weights (A:B, A,B,C or one number): one hypothesis file per weight, "
                   "decoded with acoustic scale 1/weight.")
@click.option("--wip", default=DEFAULT_WIP, show_default=True,
              help="Word insertion penalties (A,B,C or one number), each added to the graph "
                   "cost of every word (Kaldi's lattice-add-penalty): one hypothesis file per "
                   "(LM weight, penalty), named <lmwt>_<wip> unless 0 is the only penalty. "
                   "Kaldi's local/score.sh sweeps 0.0,0.5,1.0.")
@click.option("--text", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Reference transcripts (Kaldi text), copied to OUT/ref.txt for scoring, with "
                   "the utt2spk beside it as OUT/utt2spk (the speakers score reports on).")
@click.option("--oracle", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Decode from pdf alignments (lang/pdf_ali/<split>.scp) instead of a model: "
                   "tests the graph. MODEL and DATA may then be '-'.")
@click.option("--tid2pdf", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Transition-id -> pdf map (lines 'tid pdf [phone [hmm-state]]', from Kaldi's "
                   "show-transitions) for a Kaldi graph (utils/mkgraph.sh) whose input labels "
                   "are transition-ids.")
@click.option("--lattices/--no-lattices", default=False, show_default=True,
              help="Search each utterance once at acoustic scale --acwt keeping a word lattice "
                   "(Kaldi's latgen-faster; OUT/lat/lat.<job>.gz, Kaldi's binary CompactLattice "
                   "archive), then take every --lmwt x --wip setting's hyps and CTMs from the "
                   "lattices: one search for the whole grid.")
@click.option("--lattice-beam", type=POSITIVE, default=DEFAULT_LATTICE_BEAM, show_default=True,
              help="With --lattices: keep every word sequence within this cost of the best "
                   "(graph + acwt x acoustic).")
@click.option("--first-pass", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A GMM's speaker adaptation (Kaldi's decode_fmllr.sh): the decode dir of a "
                   "speaker-independent first pass with --lattices (the LDA+MLLT model on the same "
                   "tree); each speaker's fMLLR transform against MODEL (the SAT model) comes from "
                   "its best paths, silence down-weighted, and is written to OUT/trans.scp.")
@click.option("--first-pass-lmwt", type=POSITIVE, default=None,
              help="The LM weight of the first pass's best paths [1/--acwt].")
@click.option("--transforms", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Speaker fMLLR transforms (a trans.scp) for a SAT model, instead of --first-pass.")
@click.option("--context", type=click.IntRange(0), default=None,
              help="Frames of each neighbouring chunk a network's chunk is scored with [the model's "
                   "training context, train --context].")
@click.option("--ensemble", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              multiple=True,
              help="Another network (final.pt on the same tree; repeatable): each frame's scores "
                   "are the mean of MODEL's and these networks' log posterior - log prior "
                   "(Kaldi's frame-level system combination), one search.")
@click.pass_context
def decode(ctx: click.Context, model: Path, graph: Path, data: Path, out: Path, nj: int,
           acwt: float, beam: float, max_active: int, lmwt: str, wip: str, text: Path | None,
           oracle: Path | None, tid2pdf: Path | None, lattices: bool, lattice_beam: float,
           first_pass: Path | None, first_pass_lmwt: float | None, transforms: Path | None,
           context: int | None, ensemble: tuple[Path, ...], config: str | None) -> None:
    """Decode DATA (an archive .h5 or shard manifest .json) with MODEL (final.pt) on GRAPH
    (lang/graph, or a Kaldi graph dir with --tid2pdf); or, for the GMM baselines, DATA a features dir (the MFCC of
    prepare features) with MODEL an aligner rung (prepare align's models/<stage>.pt) on its
    graph (prepare gmm-graph).

    Writes OUT/hyp/<lmwt>.txt, OUT/ctm/<lmwt>.ctm (<lmwt>_<wip> with several --wip),
    OUT/log/ and, with --text, OUT/ref.txt (and OUT/utt2spk); then `asrtrain score --sweep OUT` gives the WER
    per setting. With --lattices also OUT/lat/lat.<job>.gz.
    """
    from asrtrain.core.errors import ConfigError, InputError
    from asrtrain.core.runlog import command_run
    from asrtrain.decode.decoder import DecodeConfig
    from asrtrain.decode.decoder import decode as run_decode
    from asrtrain.decode.grid import parse_lmwt, parse_wip, plain_names

    try:
        lmwts = parse_lmwt(lmwt, acwt)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"--lmwt {lmwt!r}: "), ctx,
                                 param_hint="'--lmwt'") from None
    try:
        wips = parse_wip(wip)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"--wip {wip!r}: "), ctx,
                                 param_hint="'--wip'") from None
    none = Path("-")
    if oracle is None:
        for what, p in (("MODEL", model), ("DATA", data)):
            if p == none or not p.exists():
                raise InputError(f"{what} not found (give a file, or use --oracle)", p)
    cfg = DecodeConfig(graph=graph, out=out, model=None if model == none else model,
                       data=None if data == none else data, oracle=oracle, nj=nj, acwt=acwt,
                       beam=beam, max_active=max_active, lmwts=lmwts, wips=wips, text=text,
                       tid2pdf=tid2pdf, lattices=lattices, lattice_beam=lattice_beam,
                       first_pass=first_pass, first_pass_lmwt=first_pass_lmwt,
                       transforms=transforms, context=context, ensemble=list(ensemble))
    with command_run("decode", out, resolved_params(ctx)):
        figures = run_decode(cfg)
    speed = (f"{figures['rtf_decode_total']:.4f} for the lattices and the sweep"
             if lattices else f"{figures['rtf_decode_per_lmwt']:.4f} per pass")
    click.echo(f"{out}: {figures['utterances']} utterances, real-time factor "
               f"{speed} (one core), hyps for LM "
               f"weights {', '.join(figures['lmwts'])}"
               + ("" if plain_names(wips) else f" x penalties {', '.join(figures['wips'])}"))
