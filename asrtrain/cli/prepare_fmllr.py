"""``asrtrain prepare fmllr``: splice + LDA, a global GMM, per-speaker fMLLR features."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.adapt.fmllr_config import FMLLR
from asrtrain.cli.options import adapt_jobs_options, config_option, resolved_params


@click.command()
@config_option
@click.argument("data", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--lda-dim", type=click.IntRange(min=1), default=FMLLR.lda_dim, show_default=True,
              help="Output dimension of the LDA (and of the fMLLR features).")
@click.option("--splice", type=click.IntRange(min=0), default=FMLLR.context, show_default=True,
              help="Frames of context each side before the LDA.")
@click.option("--gmm-components", type=click.IntRange(min=1), default=FMLLR.gmm_components, show_default=True,
              help="Gaussians of the global diagonal GMM the speakers are adapted to.")
@click.option("--gmm-iters", type=click.IntRange(min=1), default=FMLLR.gmm_iters, show_default=True,
              help="EM iterations of the GMM at its full size.")
@click.option("--ali", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Per-frame class labels for the LDA (kaldiio int vectors): pdf ids, as Kaldi's "
                   "LDA+MLLT (prepare align's pdf.scp, prepare lang's pdf_ali); phone ids "
                   "give at most one dimension fewer than there are phones.")
@click.option("--model", "model", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="Use the LDA and GMM of this earlier OUT (for dev and test).")
@click.option("--iters", type=click.IntRange(min=1), default=FMLLR.iters, show_default=True,
              help="fMLLR iterations (posteriors recomputed each time).")
@click.option("--passes", type=click.IntRange(min=1), default=FMLLR.passes, show_default=True,
              help="Row-by-row sweeps per fMLLR iteration.")
@click.option("--min-frames-full", type=click.IntRange(min=1), default=FMLLR.min_full, show_default=True,
              help="Fewer frames for a speaker: a diagonal transform instead of a full one.")
@click.option("--min-frames-diag", type=click.IntRange(min=1), default=FMLLR.min_diag, show_default=True,
              help="Fewer frames for a speaker: a bias-only transform.")
@click.option("--sat-iters", type=click.IntRange(min=0), default=FMLLR.sat_iters, show_default=True,
              help="Rounds of speaker-adaptive training of the GMM (transforms, then EM on "
              "the adapted frames); 0: a speaker-independent GMM.")
@click.option("--max-frames", type=click.IntRange(min=1000), default=FMLLR.max_frames, show_default=True,
              help="Frames (evenly subsampled) to train the GMM on.")
@adapt_jobs_options
@click.pass_context
def fmllr(ctx: click.Context, data: Path, out: Path, lda_dim: int, splice: int,
          gmm_components: int, gmm_iters: int, ali: Path | None, model: Path | None, iters: int,
          passes: int, min_frames_full: int, min_frames_diag: int, max_frames: int,
          sat_iters: int, nj: int, job_cmd: str | None, config: str | None) -> None:
    """fMLLR speaker-adapted features (splice, LDA, global GMM, a transform per speaker).

    DATA is a data dir with MFCC feats.scp and utt2spk. OUT becomes a data dir of the
    adapted features (OUT/feats.scp) with OUT/trans.scp (a 40x41 transform per speaker),
    OUT/trans.summary.json (log-likelihoods before and after), OUT/lda.mat and
    OUT/gmm/, which --model reuses on dev and test. Stages already complete are skipped.
    """
    from asrtrain.adapt.fmllr import prepare_fmllr
    from asrtrain.core.runlog import command_run

    if job_cmd is not None and not job_cmd.strip():
        raise click.BadParameter("empty", param_hint="'--job-cmd'")
    with command_run("prepare-fmllr", out, resolved_params(ctx)):
        prepare_fmllr(data, out, lda_dim=lda_dim, context=splice, gmm_components=gmm_components,
                      gmm_iters=gmm_iters, ali=ali, model_dir=model, iters=iters, passes=passes,
                      min_full=min_frames_full, min_diag=min_frames_diag, max_frames=max_frames,
                      sat_iters=sat_iters, nj=nj, job_cmd=job_cmd)
