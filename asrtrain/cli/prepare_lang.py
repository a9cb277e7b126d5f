"""``asrtrain prepare lang``: lexicon, 4-gram LM, HMM topology, tree, pdf alignments, HCLG."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params
from asrtrain.lang.targets import TARGETS


@click.command()
@config_option
@click.argument("dict_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("lm_text", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("ali_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--order", type=click.IntRange(1, 6), default=4, show_default=True,
              help="N-gram order of the LM.")
@click.option("--num-pdfs", type=click.IntRange(1), default=2000, show_default=True,
              help="About how many context-dependent states (pdfs) the tree keeps.")
@click.option("--min-count", default="1,1,2,2", show_default=True,
              help="Raw-count cutoff per n-gram order (comma list, non-decreasing; the last "
                   "value repeats): pruned n-grams leave their mass to the back-off.")
@click.option("--states", type=click.IntRange(1, 5), default=3, show_default=True,
              help="HMM states per phone (left to right).")
@click.option("--pron-min-count", type=click.IntRange(0), default=1, show_default=True,
              help="Add in-context pronunciations seen this often in the training alignments "
                   "to the lexicon (0: the dict's pronunciations only).")
@click.option("--targets", type=click.Choice(TARGETS), default="auto", show_default=True,
              help="HMM states of the tree and the training targets: the aligner's "
                   "(state.scp, written by prepare align), or each phone split evenly "
                   "(phone-only alignments such as the synthesizer's); auto: the aligner's "
                   "where a split has them.")
@click.pass_context
def lang(ctx: click.Context, dict_dir: Path, lm_text: Path, ali_dir: Path, out: Path, order: int,
         num_pdfs: int, min_count: str, states: int, pron_min_count: int, targets: str,
         config: str | None) -> None:
    """Build the lang directory and the decoding graph OUT/graph/HCLG.fst.

    DICT_DIR is a Kaldi dict dir (lexicon.txt, silence/nonsilence phones), LM_TEXT one
    sentence per line, ALI_DIR the corpus dir (phones.txt, {train,dev,test}/ali.scp, and
    state.scp where the aligner wrote HMM states).
    Writes phones.txt, words.txt, L.fst, L_disambig.fst, lm.arpa (interpolated modified
    Kneser-Ney), G.fst, tree, num_pdfs, pdf_ali/{split}.scp (the archive's targets) and
    graph/ (HCLG with input labels pdf+1).
    """
    from asrtrain.core.runlog import command_run
    from asrtrain.lang.prepare import prepare_lang

    with command_run("prepare-lang", out, resolved_params(ctx)):
        figures = prepare_lang(dict_dir, lm_text, ali_dir, out, order=order, num_pdfs=num_pdfs,
                               min_count=min_count, states=states,
                               pron_min_count=pron_min_count, targets=targets)
    hclg = figures["sizes"]["HCLG"]
    ppl = figures.get("dev_perplexity")
    click.echo(f"{out}: {figures['words']} words ({figures.get('pron_variants', 0)} learned "
               f"pronunciation variants), {figures['num_pdfs']} pdfs (tree "
               f"{figures['tree_id']}), LM n-grams {figures['ngrams']}"
               + (f", dev perplexity {ppl:.1f}" if ppl else "")
               + f"; HCLG {hclg[0]} states {hclg[1]} arcs")
