"""``asrtrain prepare sizes``: the recipe sizes for a corpus, as lines a recipe sources."""

from __future__ import annotations

import os
from pathlib import Path

import click


@click.command()
@click.argument("feats_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--lm-text", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="The LM text (one sentence a line): also size the LM order.")
@click.option("--chunk", type=click.IntRange(1), default=None,
              help="Frames per training chunk, for the batch's steps an epoch "
                   "(default: asrtrain.data.sizes.CHUNK_FRAMES).")
def sizes(feats_dir: Path, lm_text: Path | None, chunk: int | None) -> None:
    """Print name=value lines of the sizes that suit the training features FEATS_DIR
    (its utt2num_frames): alignment ladder, tree, BLSTM, epochs, the model kept (select),
    adaptation, LM order, and the network's input streams with the source of its fMLLR stream (SAT below 20 h); and
    the learners (strategy, nproc) for this machine's GPUs.

    The rule and its anchors are in asrtrain/data/sizes.py; recipes/custom sources the
    output for every size left at 'auto'.
    """
    from asrtrain.data.sizes import (
        CHUNK_FRAMES,
        count_frames,
        count_tokens,
        learners_for,
        recipe_sizes,
        shell_lines,
    )

    frames, utts = count_frames(feats_dir)
    tokens = count_tokens(lm_text) if lm_text is not None else None
    click.echo(f"# {frames / 360000:.3f} h of distinct speech in {utts} recordings of {feats_dir}"
               + (f"; LM text {tokens} words" if tokens is not None else ""))
    click.echo(shell_lines(recipe_sizes(frames, tokens, chunk or CHUNK_FRAMES)), nl=False)
    from asrtrain.distributed.launch import local_gpus

    gpus = local_gpus()
    click.echo(f"# learners for this machine ({gpus} GPUs)")
    click.echo(shell_lines(learners_for(gpus, len(os.sched_getaffinity(0)))), nl=False)
