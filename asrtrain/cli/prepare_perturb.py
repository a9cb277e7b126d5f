"""``asrtrain prepare perturb``: speed-perturbed copies of a Kaldi data dir (Kaldi's 3-way)."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params
from asrtrain.data.perturb import DEFAULT_SPEEDS


@click.command()
@config_option
@click.argument("data", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--speeds", default=",".join(map(str, DEFAULT_SPEEDS)), show_default=True, metavar="S,S,...",
              help="Speed factors, comma-separated (1.0: the original, ids unchanged).")
@click.pass_context
def perturb(ctx: click.Context, data: Path, out: Path, speeds: str, config: str | None) -> None:
    """Write OUT, a Kaldi data dir with every utterance of DATA at each speed.

    As Kaldi's perturb_data_dir_speed_3way.sh: wav.scp entries become sox pipes
    ('sox FILE -t wav - speed 0.9 |'; sox keeps the sample rate), utterance,
    speaker and recording ids get the prefix 'sp0.9-', segments times and utt2dur
    are divided by the speed, and utt2uniq maps each copy to its original.
    Features, alignments and CMVN of DATA are not carried (compute them on OUT).
    OUT appears only when complete.
    """
    from asrtrain.data.perturb import parse_speeds, perturb_dir

    summary = perturb_dir(data, out, parse_speeds(speeds), resolved_params(ctx))
    total = sum(summary.utterances.values())
    click.echo(f"{out}: {total} utterances ({', '.join(f'{n} at speed {s}' for s, n in summary.utterances.items())}), "
               f"{summary.speakers} speakers")
