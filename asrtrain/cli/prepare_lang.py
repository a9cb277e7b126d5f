"""``asrtrain prepare lang``: lexicon, 4-gram LM, HMM topology, tree, pdf alignments, HCLG."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params
from asrtrain.lang.targets import TARGETS


@click.command()
@config_option
@click.argument("dict_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("lm_text", type=click.Path(exists=True, dir_okay=False, allow_dash=True,
                                           path_type=Path))
@click.argument("ali_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--order", type=click.IntRange(1, 6), default=4, show_default=True,
              help="N-gram order of the LM.")
@click.option("--num-pdfs", type=click.IntRange(1), default=2000, show_default=True,
              help="About how many context-dependent states (pdfs) the tree keeps.")
@click.option("--tree", "tree_from", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None,
              help="Train on the tree of this aligner rung (prepare align's models/NAME.pt, "
                   "e.g. sat.pt), as Kaldi's nnet recipes use the GMM's tree, instead of "
                   "growing one of --num-pdfs from the alignments' frame counts.")
@click.option("--min-count", default="1,1,2,2", show_default=True,
              help="Raw-count cutoff per n-gram order (comma list, non-decreasing; the last "
                   "value repeats): pruned n-grams leave their mass to the back-off.")
@click.option("--arpa", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None,
              help="An existing ARPA LM (plain or gzipped, any size) instead of estimating one "
                   "from text: give LM_TEXT as '-'. N-grams of words without a pronunciation "
                   "are skipped and counted.")
@click.option("--prune-threshold", type=click.FloatRange(min=0), default=None,
              help="Entropy-prune the first-pass LM (the one in G and HCLG) at this relative "
                   "perplexity increase (SRILM's -prune, e.g. 1e-7); the full LM is kept in "
                   "lm_full/ for lattice rescoring.")
@click.option("--prune-ngrams", type=click.IntRange(min=1), default=None,
              help="Entropy-prune the first-pass LM to at most this many n-grams (all orders) "
                   "instead of giving a threshold.")
@click.option("--exclude-text", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None,
              help="A Kaldi text (utterance id, words) whose transcripts the LM must not learn: "
                   "one copy of each is left out of LM_TEXT, counted in the log and "
                   "lm_report.json. recipes/custom passes the dev set it held out of train.")
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
         num_pdfs: int, tree_from: Path | None, min_count: str, arpa: Path | None, prune_threshold: float | None,
         prune_ngrams: int | None, exclude_text: Path | None, states: int, pron_min_count: int,
         targets: str, config: str | None) -> None:
    """Build the lang directory and the decoding graph OUT/graph/HCLG.fst.

    DICT_DIR is a Kaldi dict dir (lexicon.txt, silence/nonsilence phones), LM_TEXT one
    sentence per line ('-' with --arpa), ALI_DIR the corpus dir (phones.txt,
    {train,dev,test}/ali.scp with phone.ctm, each phone's start, or state.scp where the
    aligner wrote HMM states: without either, two equal phones in a row cannot be told apart
    and the command refuses).
    Writes phones.txt, words.txt, L.fst, L_disambig.fst, lm.arpa (the first-pass LM:
    interpolated modified Kneser-Ney from LM_TEXT or the --arpa file, entropy-pruned with
    --prune-*), G.fst, lm_full/ (the full LM for rescoring), lm_report.json, tree,
    num_pdfs, pdf_ali/{split}.scp (the archive's targets) and graph/ (HCLG with input
    labels pdf+1).
    """
    from asrtrain.core.errors import ConfigError
    from asrtrain.core.runlog import command_run
    from asrtrain.lang.lang_lm import Pruning
    from asrtrain.lang.prepare import prepare_lang

    text: Path | None = None if str(lm_text) == "-" else lm_text
    if arpa is not None and text is not None:
        raise ConfigError("LM_TEXT and --arpa both give an LM: pass '-' as LM_TEXT with --arpa")
    if arpa is None and text is None:
        raise ConfigError("LM_TEXT is '-': give the LM as an ARPA file with --arpa")
    pruning = Pruning(threshold=prune_threshold, ngrams=prune_ngrams)
    with command_run("prepare-lang", out, resolved_params(ctx)):
        figures = prepare_lang(dict_dir, text, ali_dir, out, order=order, num_pdfs=num_pdfs,
                               min_count=min_count, states=states,
                               pron_min_count=pron_min_count, targets=targets, arpa=arpa,
                               pruning=pruning, exclude_text=exclude_text, tree_from=tree_from)
    hclg = figures["sizes"]["HCLG"]
    ppl = figures.get("dev_perplexity")
    click.echo(f"{out}: {figures['words']} words ({figures.get('pron_variants', 0)} learned "
               f"pronunciation variants), {figures['num_pdfs']} pdfs (tree "
               f"{figures['tree_id']}), LM n-grams {figures['ngrams']}"
               + (f" (first pass {figures['ngrams_first']})"
                  if figures['ngrams_first'] != figures['ngrams'] else "")
               + (f", dev perplexity {ppl:.1f}" if ppl else "")
               + f"; HCLG {hclg[0]} states {hclg[1]} arcs")
