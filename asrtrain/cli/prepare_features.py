"""``asrtrain prepare features``: log-mel or MFCC features of a Kaldi data dir."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params


@click.command()
@config_option
@click.argument("data", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--type", "feat_type", type=click.Choice(["logmel", "mfcc"]), default="logmel",
              show_default=True, help="Log-mel filterbank (Kaldi fbank) or MFCC.")
@click.option("--num-bins", type=click.IntRange(1), default=40, show_default=True,
              help="Mel bins.")
@click.option("--num-ceps", type=click.IntRange(1), default=13, show_default=True,
              help="Cepstra (MFCC only).")
@click.option("--deltas/--no-deltas", default=False, show_default=True,
              help="Append Δ and ΔΔ (Kaldi add-deltas: 40 bins become 120).")
@click.option("--dither", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Gaussian dither in int16 units, seeded by the utterance id (0: none).")
@click.option("--sample-rate", type=click.IntRange(1), default=16000, show_default=True,
              help="Expected sample rate of the audio (no resampling).")
@click.option("--nj", type=click.IntRange(1), default=2, show_default=True,
              help="Parallel jobs (processes; one ark each).")
@click.pass_context
def features(ctx: click.Context, data: Path, out: Path, feat_type: str, num_bins: int,
             num_ceps: int, deltas: bool, dither: float, sample_rate: int, nj: int,
             config: str | None) -> None:
    """Compute features of the Kaldi data dir DATA into the data dir OUT.

    OUT gets feats.scp (arks in OUT/data/), per-speaker cmvn.scp (Kaldi stats),
    utt2num_frames, and copies of DATA's text, utt2spk, spk2utt, wav.scp,
    utt2dur and spk2gender. Utterances shorter than one frame are left out,
    logged and listed in OUT/skipped_utts.
    """
    from asrtrain.core.errors import ConfigError
    from asrtrain.core.runlog import command_run
    from asrtrain.data.features import FeatureConfig, make_features

    try:
        cfg = FeatureConfig(type=feat_type, num_bins=num_bins, num_ceps=num_ceps, deltas=deltas,
                            dither=dither, sample_rate=sample_rate)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    with command_run("prepare-features", out, resolved_params(ctx),
                     extra_fingerprint={"features": cfg.to_dict()}):
        summary = make_features(data, out, cfg, nj=nj)
    skipped = len(summary["skipped"])
    click.echo(f"{out}: {summary['utterances']} utterances, {summary['frames']} frames of "
               f"dim {summary['dim']}" + (f"; {skipped} skipped (see {out}/skipped_utts)"
                                          if skipped else ""))
