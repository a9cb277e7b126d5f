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
@click.option("--unaligned", type=click.Choice(["skip", "keep"]), default="skip", show_default=True,
              help="An utterance --ali lacks: skip it (a training set), or keep it with its targets "
                   "ignored (a held-out set: decoded, not in the held-out loss).")
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
@click.option("--shards", type=click.IntRange(1), default=None,
              help="Write OUT.json (a manifest) and N shards OUT.1.h5 ... OUT.N.h5 of the sorted "
                   "utterances, read as one archive by train, decode and info.  [default: one file]")
@click.option("--nj", type=click.IntRange(1), default=None,
              help="Shards written at once, each in its own process.  [default: one a shard, up "
                   "to the cores]")
@click.option("--shard", "only", type=click.IntRange(1), default=None, metavar="K",
              help="Write only shard K of --shards (a cluster array job, as Kaldi's JOB); the job "
                   "that finds every shard complete writes the manifest.")
@click.pass_context
def archive(ctx: click.Context, out: Path, streams: tuple[str, ...], ali: Path | None,
            num_pdfs: int | None, unaligned: str, cmvns: tuple[str, ...], norm_vars: bool, utt2spk: Path | None,
            periods: tuple[str, ...], chunk: int, length_tolerance: int, shards: int | None,
            nj: int | None, only: int | None, config: str | None) -> None:
    """Write the training (or decoding) archive OUT.h5 from feature streams.

    The paper's input: --stream fmllr=… (40) --stream ivector=… (100)
    --stream logmel=… (40 with Δ, ΔΔ: 120) = 260 columns. Skipped utterances are
    logged and listed in the archive; see `asrtrain info OUT.h5`. With --shards N,
    OUT is a manifest OUT.json over N shards written as parallel jobs.
    """
    from asrtrain.core.errors import ConfigError
    from asrtrain.core.runlog import command_run
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import build_streams
    from asrtrain.data.shards import is_manifest, shard_path

    if shards is None and (nj is not None or only is not None):
        raise ConfigError("--nj and --shard go with --shards N")
    if shards is None and is_manifest(out):
        raise ConfigError(f"{out} names a shard manifest: add --shards N, or name the archive *.h5")
    built, speakers = build_streams(streams, cmvns, periods, utt2spk, norm_vars)
    params = resolved_params(ctx)
    own = out if only is None else shard_path(out, only)  # what this command writes (and locks)
    with command_run(f"prepare-archive.{own.stem}", out.parent, params,
                     config_name=f"{own.name}.config.yaml",
                     fingerprint_name=f"{own.name}.fingerprint.json", lock=own) as run:
        if shards is None:
            summary = write_archive(out, built, None if ali is None else str(ali), num_pdfs, speakers,
                                    chunk=chunk, tolerance=length_tolerance, options=params,
                                    unaligned=unaligned)
        else:
            from asrtrain.data.shard_writer import write_sharded

            summary = write_sharded(out, built, None if ali is None else str(ali), num_pdfs, speakers,
                                    shards=shards, nj=nj, only=only, log_dir=run.log_path.parent,
                                    chunk=chunk, tolerance=length_tolerance, options=params,
                                    unaligned=unaligned)
    skipped = summary["skipped"]
    if shards is not None and not summary["manifest"]:
        click.echo(f"{own}: shard {only} of {shards} written; the manifest {out} waits for the others")
    where = own if only is not None else out if shards is None else f"{out} ({shards} shards)"
    click.echo(f"{where}: {summary['utterances']} utterances, {summary['frames']} frames in "
               f"{summary['chunks']} chunks of {chunk}, dim {summary['feat_dim']}"
               + (f"; {len(skipped)} skipped (e.g. {next(iter(skipped))}: "
                  f"{next(iter(skipped.values()))})" if skipped else "")
               + (f"; {len(summary['unaligned'])} kept without an alignment (e.g. "
                  f"{summary['unaligned'][0]}: targets ignored)" if summary["unaligned"] else ""))
