"""``asrtrain transcribe``: an exported model applied to recordings as they come."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import POSITIVE, config_option, resolved_params


@click.command()
@config_option
@click.argument("model", type=click.Path(path_type=Path))
@click.argument("audio", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write OUT/text, OUT/ctm or OUT/transcripts.json [standard output].")
@click.option("--format", "fmt", type=click.Choice(["text", "ctm", "json"]), multiple=True,
              default=("text",), show_default=True,
              help="text: id and words; ctm: word times and confidences; json: words, times and "
                   "confidences. Repeat it with --out to write several from one pass.")
@click.option("--utt2spk", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Lines 'FILE SPEAKER' (path, file name or stem): files of one speaker share "
                   "CMVN and adaptation [each file its own speaker].")
@click.option("--speaker-per", type=click.Choice(["file", "segment"]), default="file",
              show_default=True,
              help="Without --utt2spk: adapt (CMVN, i-vectors, fMLLR) to each file, or to each "
                   "cut segment (a recording of several voices).")
@click.option("--channel", type=click.IntRange(1), default=1, show_default=True,
              help="The channel of multi-channel recordings to transcribe.")
@click.option("--max-seconds", type=POSITIVE, default=None,
              help="Recordings longer than this are cut at pauses [20].")
@click.option("--device", default=None, help="torch device of the network [cuda when there is one].")
@click.option("--threads", type=click.IntRange(1), default=1, show_default=True,
              help="CPU threads of the network.")
@click.pass_context
def transcribe(ctx: click.Context, model: Path, audio: tuple[Path, ...], out: Path | None,
               fmt: tuple[str, ...], utt2spk: Path | None, speaker_per: str, channel: int,
               max_seconds: float | None,
               device: str | None, threads: int, config: str | None) -> None:
    """Transcribe AUDIO (files sox or libsndfile reads, at any rate; list files .txt/.lst with
    a path a line; or one Kaldi data dir) with MODEL (from asrtrain export).

    Inputs that cannot be transcribed get one line each on standard error and the others
    go on; the exit status is 1 only when no input could be transcribed.
    """
    import contextlib

    import torch

    from asrtrain.core.errors import InputError
    from asrtrain.core.progress import Progress
    from asrtrain.core.runlog import command_run
    from asrtrain.transcribe.output import FILE_NAMES, render
    from asrtrain.transcribe.segment import MAX_SECONDS
    from asrtrain.transcribe.transcriber import Transcriber

    fmts = tuple(dict.fromkeys(fmt))   # in the order given, each once
    if len(fmts) > 1 and out is None:
        raise click.UsageError("several --format values need --out (one file each)")
    torch.set_num_threads(threads)
    speakers = _read_utt2spk(utt2spk) if utt2spk else None
    logged = command_run("transcribe", out, resolved_params(ctx)) if out else contextlib.nullcontext()
    with logged:
        engine = Transcriber(model, device=device)
        with Progress("transcribe", unit=" utts") as bar:
            def advance(done: int, total: int) -> None:
                if bar.total != total:
                    bar.set_total(total)
                bar.advance(1)
            report = engine.run(list(audio), utt2spk=speakers, channel=channel - 1,
                                max_seconds=max_seconds or MAX_SECONDS, progress=advance,
                                segment_speakers=speaker_per == "segment")
        for failure in report.failures:
            click.echo(f"Warning: {failure.reason}", err=True)
        if not report.transcripts:
            raise InputError(f"nothing transcribed: {len(report.failures)} input(s) failed")
        if out is None:
            click.echo(render(report.transcripts, fmts[0]), nl=False)
        else:
            from asrtrain.core.atomic import write_text

            for name in fmts:
                write_text(out / FILE_NAMES[name], render(report.transcripts, name))
        total = len(report.transcripts) + len(report.failures)
        click.echo(f"transcribed {len(report.transcripts)} of {total} inputs"
                   f"{f' ({len(report.failures)} failed)' if report.failures else ''}: "
                   f"{report.audio_seconds:.1f} s of audio in {report.wall_seconds:.1f} s, real-time "
                   f"factor {report.rtf or 0:.3f} (network on {report.device}"
                   + (f"; SAT first pass {report.first_pass['seconds']:.1f} s"
                      if report.first_pass else "") + ")"
                   + (f"; {', '.join(str(out / FILE_NAMES[f]) for f in fmts)}" if out else ""),
                   err=True)


def _read_utt2spk(path: Path) -> dict[str, str]:
    """``FILE SPEAKER`` lines."""
    from asrtrain.data.kaldi_dir import read_table

    return read_table(path)
