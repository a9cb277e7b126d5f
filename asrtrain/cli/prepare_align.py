"""``asrtrain prepare align``: phone alignments from nothing (a flat-start HMM-GMM ladder)."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.align.remote import CONNECT_TIMEOUT
from asrtrain.cli.options import POSITIVE, config_option, resolved_params


def _split_dirs(value: tuple[str, ...], option: str = "--split") -> dict[str, Path]:
    out: dict[str, Path] = {}
    for item in value:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise click.BadParameter(f"{item!r}: expected NAME=DIR", param_hint=f"'{option}'")
        if not Path(path).is_dir():
            raise click.BadParameter(f"{path}: not a directory", param_hint=f"'{option}'")
        if name == "train" or name in out:
            raise click.BadParameter(f"{name!r}: a split of that name is already given",
                                     param_hint=f"'{option}'")
        out[name] = Path(path)
    return out


@click.command()
@config_option
@click.argument("dict_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("train", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("out", type=click.Path(file_okay=False, path_type=Path))
@click.option("--split", "splits", multiple=True, metavar="NAME=DIR",
              help="Another data dir to align with the final model (dev=..., test=...).")
@click.option("--extra", "extras", multiple=True, metavar="NAME=DIR",
              help="More training data the ladder does not train on (speed-perturbed copies of "
              "TRAIN: Kaldi aligns data_sp with the GMM of the originals): aligned as a --split "
              "is, and with a SAT ladder its fmllr/NAME written from the transforms its "
              "transcripts gave, as train's are (also with --no-held-out-sat-feats).")
@click.option("--stages", default="mono,tri,lda,sat", show_default=True,
              help="Rungs of the ladder, in order (a prefix of mono,tri,lda,sat).")
@click.option("--oov", default=None, help="Map transcript words missing from the lexicon to "
              "this word (it must have a pronunciation); without it they are an error.")
@click.option("--phones", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="A phones.txt whose ids the alignments keep (a corpus').")
@click.option("--mono-gauss", type=click.IntRange(1), default=1000, show_default=True,
              help="Gaussians of the monophone model.")
@click.option("--mono-iters", type=click.IntRange(1), default=25, show_default=True)
@click.option("--mono-utts", type=click.IntRange(0), default=0, show_default=True,
              help="Train the monophones on this many shortest utterances, as Kaldi's "
              "recipes do on large corpora (0: all).")
@click.option("--leaves", type=click.IntRange(1), default=1000, show_default=True,
              help="Context-dependent states (tree leaves) of the triphone models.")
@click.option("--tree", "tree_kind", type=click.Choice(["questions", "counts"]), default="questions",
              show_default=True,
              help="How the triphone tree ties contexts: questions (Kaldi's: each phone state's "
              "contexts split by the left/right phone-set question that best raises their "
              "frames' likelihood; the sets from clustering the phones) or counts (a triphone "
              "with enough frames keeps its own pdf, the rest tie back to their biphone or "
              "phone state).")
@click.option("--retree/--no-retree", default=False, show_default=True,
              help="With --tree questions: LDA+MLLT grows its own tree from the triphones' "
              "alignments on its own features, as Kaldi's train_lda_mllt.sh (SAT keeps it); "
              "else the triphones' tree serves every rung (on speechocean762's 40-minute cut "
              "the SAT GMM gave 73.97% with its own tree against 72.99% without).")
@click.option("--gauss", type=click.IntRange(1), default=8000, show_default=True,
              help="Gaussians of the triphone, LDA+MLLT and SAT models.")
@click.option("--iters", type=click.IntRange(1), default=20, show_default=True,
              help="EM iterations of each triphone rung.")
@click.option("--beam", type=POSITIVE, default=10.0, show_default=True)
@click.option("--retry-beam", type=POSITIVE, default=40.0, show_default=True,
              help="Beam of the second try for utterances that fail at --beam.")
@click.option("--last-beam", type=click.FloatRange(0.0), default=400.0, show_default=True,
              help="Final alignments only: a last try at this beam for utterances that fail "
              "at --retry-beam (speakers unlike the training ones); 0: none, as Kaldi.")
@click.option("--max-lost", type=click.FloatRange(0.0, 1.0), default=0.05, show_default=True,
              help="Fail when more than this share of a split's utterances cannot be aligned.")
@click.option("--nj", type=click.IntRange(1), default=1, show_default=True,
              help="Jobs (processes), the training speakers split among them by speaker, "
              "balanced by frames; each realigns and accumulates its own (and each split's "
              "final alignment its speakers'). Results equal --nj 1 up to the order of float "
              "sums.")
@click.option("--job-cmd", default=None, metavar="CMD",
              help="Start each job with CMD followed by the worker's command line (e.g. "
              "'srun --ntasks=1 --nodes=1', or 'env' for this host): the jobs then run "
              "where CMD puts them, read their speakers' features from the data dirs (a "
              "filesystem every host sees) and connect back to --listen. Without it the "
              "jobs are processes of this one.")
@click.option("--listen", default=None, metavar="HOST[:PORT]",
              help="With --job-cmd: the address the jobs connect to (this host's name when "
              "it resolves to a non-loopback address, else 127.0.0.1; any free port).")
@click.option("--connect-timeout", type=POSITIVE, default=CONNECT_TIMEOUT, show_default=True,
              help="With --job-cmd: seconds a started job has to connect (a queue's wait "
              "included) before the run stops.")
@click.option("--reference", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=None, help="A corpus dir with exact alignments ({split}/phone.ctm, "
              "ali.scp): report.json then says how close each rung's alignments are.")
@click.option("--held-out-sat-feats/--no-held-out-sat-feats", default=True, show_default=True,
              help="Also write fmllr/<split> of the --split dirs: SAT features with each speaker's "
                   "transform estimated without a transcript against every Gaussian of the SAT "
                   "model (about 760 CPU-seconds a held-out hour). The recipes adapt dev and test "
                   "from the SAT first pass instead and pass --no-held-out-sat-feats.")
@click.pass_context
def align(ctx: click.Context, dict_dir: Path, train: Path, out: Path, splits: tuple[str, ...],
          extras: tuple[str, ...], stages: str, oov: str | None, phones: Path | None,
          mono_gauss: int, mono_iters: int, mono_utts: int,
          leaves: int, tree_kind: str, retree: bool, gauss: int, iters: int, beam: float, retry_beam: float, last_beam: float,
          max_lost: float, nj: int, job_cmd: str | None, listen: str | None,
          connect_timeout: float, reference: Path | None, held_out_sat_feats: bool,
          config: str | None) -> None:
    """Align TRAIN (and the --split dirs) from nothing: flat-start monophones, triphones,
    LDA+MLLT, SAT, each rung realigning the data for the next.

    DICT_DIR is a Kaldi dict dir; TRAIN a data dir with MFCC feats.scp (and cmvn.scp)
    from `prepare features --type mfcc`, text and utt2spk. OUT becomes what `prepare
    lang` reads as its alignment dir: phones.txt and, per split, ali.scp (a phone per
    frame), phone.ctm, state.scp, text and failed.txt; models/ holds each rung and
    report.json the figures.
    """
    from asrtrain.align.corpus import Beams
    from asrtrain.align.ladder import STAGES, LadderConfig
    from asrtrain.align.output import check_out_path
    from asrtrain.align.remote import Launch
    from asrtrain.align.run import AlignJob, prepare_align
    from asrtrain.core.runlog import command_run

    wanted = tuple(s.strip() for s in stages.split(",") if s.strip())
    if not wanted or wanted != STAGES[:len(wanted)]:
        raise click.BadParameter(f"{stages!r}: a prefix of {','.join(STAGES)}",
                                 param_hint="'--stages'")
    if listen is not None and job_cmd is None:
        raise click.BadParameter("needs --job-cmd (the jobs it is for)", param_hint="'--listen'")
    if job_cmd is not None and not job_cmd.strip():
        raise click.BadParameter("empty", param_hint="'--job-cmd'")
    held_out, extra = _split_dirs(splits), _split_dirs(extras, "--extra")
    if set(held_out) & set(extra):
        raise click.BadParameter(f"{sorted(set(held_out) & set(extra))[0]!r}: also a --split",
                                 param_hint="'--extra'")
    named = {"train": train, **held_out, **extra}
    cfg = LadderConfig(stages=wanted, mono_gauss=mono_gauss, mono_iters=mono_iters,
                       mono_utts=mono_utts,
                       tri_leaves=leaves, tree=tree_kind, retree=retree, tri_gauss=gauss, tri_iters=iters,
                       beams=Beams(beam=beam, retry_beam=retry_beam,
                                   last_beam=last_beam), nj=nj)
    launch = None if job_cmd is None else Launch(job_cmd, out, listen, connect_timeout)
    job = AlignJob(dict_dir, out, named, cfg, oov=oov, phones=phones, max_lost=max_lost,
                   reference=reference, launch=launch, held_out_sat_feats=held_out_sat_feats,
                   extra=frozenset(extra))
    check_out_path(out)   # before the log dir exists
    with command_run("prepare-align", out, resolved_params(ctx)):
        report = prepare_align(job)
    for name, fig in report["splits"].items():
        lost = sum(fig["lost"].values())
        click.echo(f"{out}/{name}: {fig['aligned']} utterances aligned, {lost} lost")


@click.command(hidden=True)
@click.option("--connect", required=True, metavar="HOST:PORT", help="The parent's address.")
@click.option("--job", type=click.IntRange(1), required=True, help="This job's number.")
@click.option("--authkey-file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              required=True, help="The key the parent wrote (OUT/.align-worker.key).")
def align_worker(connect: str, job: int, authkey_file: Path) -> None:
    """One job of `prepare align --job-cmd`: connects to the parent, reads its speakers'
    features, answers the parent's calls until it closes the connection."""
    from asrtrain.align.remote import run_worker

    run_worker(connect, job, authkey_file)
