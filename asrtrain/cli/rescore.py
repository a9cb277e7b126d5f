"""``asrtrain rescore``: a decode's lattices rescored with the full LM (Kaldi's
``steps/lmrescore_const_arpa.sh``), then swept over LM weights and penalties."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params
from asrtrain.decode.grid import DEFAULT_LMWT, DEFAULT_WIP


@click.command()
@config_option
@click.argument("old_lm", type=click.Path(exists=True, path_type=Path))
@click.argument("new_lm", type=click.Path(exists=True, path_type=Path))
@click.argument("graph", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("latdir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--lmwt", default=DEFAULT_LMWT, show_default=True,
              help="LM weights of the sweep (A:B, A,B,C or one number).")
@click.option("--wip", default=DEFAULT_WIP, show_default=True,
              help="Word insertion penalties of the sweep (A,B,C or one number); names "
                   "<lmwt>_<wip> unless 0 is the only one, as decode names them.")
@click.option("--text", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Reference transcripts, copied to OUT/ref.txt (default: LATDIR/ref.txt).")
@click.option("--tid2pdf", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Transition-id -> pdf map of a Kaldi graph (word times in the CTMs).")
@click.pass_context
def rescore(ctx: click.Context, old_lm: Path, new_lm: Path, graph: Path, latdir: Path, out: Path,
            lmwt: str, wip: str, text: Path | None, tid2pdf: Path | None,
            config: str | None) -> None:
    """Rescore the lattices of LATDIR (lat/lat.<job>.gz of `decode --lattices`) into OUT:
    the first-pass LM OLD_LM (the one GRAPH was built from) out, NEW_LM in, as Kaldi's
    lmrescore_const_arpa.sh OLD_LANG NEW_LANG. OLD_LM is a lang dir (its first-pass LM,
    lm_first/ of `prepare lang --prune-*`), NEW_LM a lang dir (its full LM, lm_full/);
    either may also be an LM store directory or an ARPA file over GRAPH's words.txt.

    OUT is a decode directory (lat/lat.<job>.gz, hyp/<name>.txt, ctm/<name>.ctm, ref.txt):
    `asrtrain score --sweep OUT` gives the WER per setting.
    """
    from asrtrain.core.errors import ConfigError
    from asrtrain.core.runlog import command_run
    from asrtrain.decode.grid import parse_lmwt, parse_wip
    from asrtrain.decode.lmrescore import RescoreConfig, run_rescore

    try:
        lmwts, wips = parse_lmwt(lmwt, 0.1), parse_wip(wip)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx) from None
    cfg = RescoreConfig(old_lm=old_lm, new_lm=new_lm, graph=graph, latdir=latdir, out=out,
                        lmwts=lmwts, wips=wips, text=text, tid2pdf=tid2pdf)
    with command_run("rescore", out, resolved_params(ctx)):
        figures = run_rescore(cfg)
    click.echo(f"{out}: {figures['utterances']} lattices rescored in "
               f"{figures['rescore_seconds']:.1f}s ({figures['states_in']} -> "
               f"{figures['states_out']} states), hyps for {len(lmwts) * len(wips)} settings")
