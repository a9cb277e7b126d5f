"""``asrtrain prepare ivectors``: UBM, total-variability extractor, i-vectors."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import adapt_jobs_options, config_option, resolved_params


@click.command()
@config_option
@click.argument("data", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--ubm-components", type=click.IntRange(min=1), default=256, show_default=True,
              help="Gaussians of the diagonal UBM.")
@click.option("--dim", type=click.IntRange(min=1), default=100, show_default=True,
              help="I-vector dimension (rank of the total-variability matrix).")
@click.option("--period", type=click.IntRange(min=1), default=10, show_default=True,
              help="Frames between online i-vectors (row k uses frames 0..k*period).")
@click.option("--online/--per-utt", default=True, show_default=True,
              help="One i-vector every --period frames (Kaldi's online form), or one per utterance.")
@click.option("--iters", type=click.IntRange(min=1), default=5, show_default=True,
              help="EM iterations of the total-variability matrix.")
@click.option("--ubm-iters", type=click.IntRange(min=1), default=10, show_default=True,
              help="EM iterations of the UBM at its full size.")
@click.option("--max-frames", type=click.IntRange(min=1000), default=500_000, show_default=True,
              help="Frames (evenly subsampled) to train the UBM on.")
@click.option("--max-utts", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Utterances (evenly spread) to train the extractor on.")
@click.option("--posterior-scale", type=click.FloatRange(min=0.0, min_open=True), default=1.0,
              show_default=True, help="Scale of the UBM posteriors (Kaldi's recipes use 0.1 online); saved with "
              "the extractor, so --extractor uses the scale it was trained with.")
@click.option("--extractor", "extractor", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Use this trained extractor (an OUT or OUT/extractor of a "
              "training run) instead of training one: for dev and test.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the initial T.")
@adapt_jobs_options
@click.pass_context
def ivectors(ctx: click.Context, data: Path, out: Path, ubm_components: int, dim: int,
             period: int, online: bool, iters: int, ubm_iters: int, max_frames: int,
             max_utts: int, posterior_scale: float, extractor: Path | None, seed: int, nj: int, job_cmd: str | None,
             config: str | None) -> None:
    """I-vectors: a UBM and a total-variability extractor, then extraction.

    DATA is a data dir with feats.scp (MFCC, or fbank with deltas). OUT gets
    OUT/ivectors.scp: online matrices (one row per --period frames, with
    OUT/ivector_period as Kaldi writes it) or one vector per utterance, and
    OUT/extractor/, which --extractor reuses on dev and test. Stages already complete
    are skipped.
    """
    from asrtrain.adapt.ivector import prepare_ivectors
    from asrtrain.core.runlog import command_run

    if job_cmd is not None and not job_cmd.strip():
        raise click.BadParameter("empty", param_hint="'--job-cmd'")
    with command_run("prepare-ivectors", out, resolved_params(ctx)):
        prepare_ivectors(data, out, ubm_components=ubm_components, dim=dim, period=period,
                         online=online, ubm_iters=ubm_iters, iters=iters, max_frames=max_frames,
                         max_utts=max_utts, posterior_scale=posterior_scale,
                         extractor_dir=extractor, seed=seed, nj=nj, job_cmd=job_cmd)
