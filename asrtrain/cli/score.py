"""``asrtrain score``: sclite-compatible WER reports, and the LM-weight sweep of a decode."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params


@click.command()
@config_option
@click.argument("ref", required=False, type=click.Path(exists=True, dir_okay=False,
                                                       path_type=Path))
@click.argument("hyp", required=False, type=click.Path(exists=True, dir_okay=False,
                                                       path_type=Path))
@click.argument("out", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--sweep", "sweep_dir", type=click.Path(exists=True, file_okay=False,
                                                      path_type=Path),
              help="Score DECODE_DIR/hyp/<name>.txt (<lmwt> or <lmwt>_<wip>) against "
                   "DECODE_DIR/ref.txt; write wer_<name> and best_wer there (REF HYP OUT are "
                   "then not given).")
@click.option("--pick-on", "pick_dir", type=click.Path(exists=True, file_okay=False,
                                                        path_type=Path),
              help="With --sweep: also sweep DEV_DECODE_DIR (same --lmwt/--wip grid, with its "
                   "ref.txt), pick the setting with the lowest dev WER and write the test WER "
                   "there to DECODE_DIR/dev_picked_wer, the best on test kept beside it as the "
                   "oracle.")
@click.option("--ref", "ref_override", type=click.Path(exists=True, dir_okay=False,
                                                       path_type=Path),
              help="With --sweep: the reference to use instead of DECODE_DIR/ref.txt.")
@click.option("--glm", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="GLM mapping rules in sclite's format (hesitations, contractions, "
                   "alternations), applied to both sides.")
@click.option("--subset", "subsets", multiple=True, metavar="NAME=PATTERN",
              help="Also report utterances whose id (or STM file) matches the glob, e.g. "
                   "swbd='sw_*' callhome='en_*'. Repeatable.")
@click.option("--fragments", type=click.Choice(["correct", "error"]), default="error",
              show_default=True,
              help="'correct': a fragment AB- matches any word starting AB (sclite -F, "
                   "as Hub5 scoring uses).")
@click.option("--optional-deletable/--no-optional-deletable", default=True,
              show_default=True,
              help="Reference words in parentheses, (UH), may be deleted at no cost "
                   "(sclite -D).")
@click.option("--filter-regex", default=r"^(\[[^\]]*\]|<[^>]*>)$", show_default=True,
              help="Tokens removed from both sides before scoring (counted); '' keeps all.")
@click.option("--split-hyphens", is_flag=True,
              help="Split hyphenated words A-B into A B (csrfilt -dh), fragments kept.")
@click.option("--extra-hyp", type=click.Choice(["error", "ignore"]), default="error",
              show_default=True,
              help="A hypothesis for an utterance the reference lacks: an error, or "
                   "left out and counted.")
@click.option("--ref-format", type=click.Choice(["auto", "text", "stm"]), default="auto",
              show_default=True)
@click.option("--hyp-format", type=click.Choice(["auto", "text", "ctm"]), default="auto",
              show_default=True)
@click.option("--utt2spk", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Speakers of a text reference (default: utt2spk beside REF, else the "
                   "utterance id up to its last '_' or '-').")
@click.option("--bootstrap", type=int, default=1000, show_default=True,
              help="Bootstrap resamplings for the 95% confidence interval (0: none).")
@click.option("--bootstrap-unit", type=click.Choice(["utterance", "speaker"]),
              default="utterance", show_default=True,
              help="Resample utterances, or speakers with their utterances (the speakers of "
                   "utt2spk; refused where there is none and the ids name one per utterance).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--lm-text", type=click.Path(exists=True, path_type=Path),
              help="The LM's training text, or the lang dir (its lm_words.txt: the text's words once "
                   "--exclude-text took dev's out): the reports also split the reference words into "
                   "those in its vocabulary and those outside it, with the errors on each (a word the "
                   "LM text lacks is mostly lost whatever the acoustic model does).")
@click.pass_context
def score(ctx: click.Context, ref: Path | None, hyp: Path | None, out: Path | None,
          sweep_dir: Path | None, pick_dir: Path | None, ref_override: Path | None,
          glm: Path | None,
          subsets: tuple[str, ...], fragments: str, optional_deletable: bool,
          filter_regex: str, split_hyphens: bool, extra_hyp: str, ref_format: str,
          hyp_format: str, utt2spk: Path | None, bootstrap: int, bootstrap_unit: str,
          seed: int, lm_text: Path | None, config: str | None) -> None:
    """Word error rate of HYP (Kaldi text or CTM) against REF (Kaldi text or STM).

    Alignment and counts agree with NIST sclite (sub 4, ins/del 3); OUT gets
    summary.txt (per speaker, per subset, bootstrap interval), alignments.pra,
    confusions.txt, wer (Kaldi's compute-wer lines, Levenshtein) and wer.json.
    A reference utterance without hypothesis is scored as all deletions and counted.

    asrtrain score --sweep DECODE_DIR scores every setting (LM weight, insertion penalty)
    of a decode; with --pick-on DEV_DECODE_DIR the setting is chosen on dev and the test
    WER there is the headline (DECODE_DIR/dev_picked_wer).
    """
    from asrtrain.core.runlog import command_run
    from asrtrain.core.textio import read_text
    from asrtrain.score.pick import pick_on
    from asrtrain.score.sweep import ScoreOptions, parse_subsets, score_files, sweep

    if sweep_dir is not None:
        if ref or hyp or out:
            raise click.UsageError("--sweep DECODE_DIR takes no REF HYP OUT arguments")
    elif not (ref and hyp and out):
        raise click.UsageError("give REF HYP OUT, or --sweep DECODE_DIR")
    elif ref_override is not None:
        raise click.UsageError("--ref goes with --sweep; give the reference as REF")
    elif pick_dir is not None:
        raise click.UsageError("--pick-on DEV_DECODE_DIR goes with --sweep TEST_DECODE_DIR")
    opts = ScoreOptions(glm=glm, fragments=fragments, optional_deletable=optional_deletable,
                        filter_regex=filter_regex or None, split_hyphens=split_hyphens,
                        extra_hyp=extra_hyp, ref_format=ref_format, hyp_format=hyp_format,
                        utt2spk=utt2spk, subsets=parse_subsets(subsets), bootstrap=bootstrap,
                        bootstrap_unit=bootstrap_unit, seed=seed, lm_text=lm_text)
    params = {k: (str(v) if isinstance(v, Path) else v) for k, v in
              resolved_params(ctx).items()}
    if sweep_dir is not None and pick_dir is not None:
        with command_run("score", sweep_dir / "score", params, lock=sweep_dir):
            picked = pick_on(sweep_dir, pick_dir, opts, ref_override)
        click.echo(f"dev-picked ({picked['picked']['name']} on {pick_dir}): "
                   f"{picked['test_line']} {picked['test_file']}")
        click.echo(f"best on test (oracle): {picked['oracle']['line']} "
                   f"{picked['oracle']['file']}")
        if picked.get("lm_text_vocabulary"):
            click.echo(picked["lm_text_vocabulary"]["line"])
        for text in picked["warnings"]:
            click.echo(f"warning: {text}")
    elif sweep_dir is not None:
        with command_run("score", sweep_dir / "score", params, lock=sweep_dir):  # writes wer_*, best_wer
            sweep(sweep_dir, opts, ref_override)
        click.echo(read_text(sweep_dir / "best_wer").rstrip())
    else:
        assert ref is not None and hyp is not None and out is not None
        with command_run("score", out, params):
            data = score_files(ref, hyp, out, opts)
        click.echo(f"{data['kaldi_line']}  (Kaldi compute-wer)")
        click.echo(f"{data['sclite_line']}  (sclite)")
        if "lm_text_vocabulary" in data:
            click.echo(data["lm_text_vocabulary"]["line"])
