"""``asrtrain prepare archive``: fuse feature streams and targets into an HDF5 archive."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params


@click.command()
@config_option
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--stream", "streams", multiple=True, required=True, metavar="NAME=SCP",
              help="A feature stream, in input order (repeat): frame-rate matrices, "
                   "per-utterance vectors, or online i-vectors.")
@click.option("--ali", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Targets: pdf ids per frame (Kaldi ali-to-pdf output); omit for decoding.")
@click.option("--num-pdfs", type=click.IntRange(1), help="Number of pdfs (needed with --ali).")
@click.option("--cmvn", "cmvns", multiple=True, metavar="NAME=CMVN.scp",
              help="Apply per-speaker CMVN stats to stream NAME (repeat; needs --utt2spk).")
@click.option("--norm-vars/--no-norm-vars", default=False, show_default=True,
              help="CMVN also normalises variances (Kaldi apply-cmvn --norm-vars).")
@click.option("--utt2spk", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Speaker of each utterance (for --cmvn).")
@click.option("--ivector-period", "periods", multiple=True, metavar="NAME=FRAMES",
              help="Stream NAME holds online i-vectors, one row per FRAMES frames (default: "
                   "read from an ivector_period file beside the scp, as Kaldi writes it).")
@click.option("--chunk", type=click.IntRange(1), default=21, show_default=True,
              help="Frames per chunk.")
@click.option("--length-tolerance", type=click.IntRange(0), default=2, show_default=True,
              help="Frame-count difference between streams (and alignment) that is trimmed; "
                   "larger differences skip the utterance.")
@click.pass_context
def archive(ctx: click.Context, out: Path, streams: tuple[str, ...], ali: Path | None,
            num_pdfs: int | None, cmvns: tuple[str, ...], norm_vars: bool, utt2spk: Path | None,
            periods: tuple[str, ...], chunk: int, length_tolerance: int,
            config: str | None) -> None:
    """Write the training (or decoding) archive OUT.h5 from feature streams.

    The paper's input: --stream fmllr=… (40) --stream ivector=… (100)
    --stream logmel=… (40 with Δ, ΔΔ: 120) = 260 columns. Skipped utterances are
    logged and listed in the archive; see `asrtrain info OUT.h5`.
    """
    from asrtrain.core.runlog import command_run
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import build_streams

    built, speakers = build_streams(streams, cmvns, periods, utt2spk, norm_vars)
    params = resolved_params(ctx)
    with command_run(f"prepare-archive.{out.stem}", out.parent, params,
                     config_name=f"{out.name}.config.yaml",
                     fingerprint_name=f"{out.name}.fingerprint.json", lock=out):
        summary = write_archive(out, built, None if ali is None else str(ali), num_pdfs, speakers,
                                chunk=chunk, tolerance=length_tolerance, options=params)
    skipped = summary["skipped"]
    click.echo(f"{out}: {summary['utterances']} utterances, {summary['frames']} frames in "
               f"{summary['chunks']} chunks of {chunk}, dim {summary['feat_dim']}"
               + (f"; {len(skipped)} skipped (e.g. {next(iter(skipped))}: "
                  f"{next(iter(skipped.values()))})" if skipped else ""))
