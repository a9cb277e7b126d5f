"""``asrtrain prepare subset``: hold out a dev set of whole speakers from a Kaldi data dir."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params


@click.command()
@config_option
@click.argument("data", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out_train", type=click.Path(file_okay=False, path_type=Path))
@click.argument("out_dev", type=click.Path(file_okay=False, path_type=Path))
@click.option("--dev-speakers", type=click.IntRange(1), required=True, metavar="N",
              help="Speakers held out for dev (fewer than DATA has).")
@click.pass_context
def subset(ctx: click.Context, data: Path, out_train: Path, out_dev: Path, dev_speakers: int,
           config: str | None) -> None:
    """Split the Kaldi data dir DATA into OUT_TRAIN and OUT_DEV by speaker.

    Dev gets N whole speakers, evenly spread over the speakers sorted by id
    (positions floor((i + 1/2) * S / N) of S): the same DATA gives the same split,
    with no seed. The dev speakers are logged. Copies of a speaker in a
    speed-perturbed dir (sp0.9-A, A, sp1.1-A; the dir has utt2uniq) count as one
    and stay together. Every table is filtered (segments with their recordings),
    spk2utt is rebuilt; each output appears only when complete.
    """
    from asrtrain.data.subset import split_by_speaker

    summary = split_by_speaker(data, out_train, out_dev, dev_speakers, resolved_params(ctx))
    click.echo(f"{out_dev}: {summary.dev_utterances} utterances of {len(summary.dev_speakers)} "
               f"speaker(s) ({' '.join(summary.dev_speakers)}); {out_train}: "
               f"{summary.train_utterances} utterances of {summary.train_speakers} speaker(s)")
