"""The root ``asrtrain`` group: version, verbosity, log file, and the error convention.

Expected failures (:class:`~asrtrain.core.errors.AsrtrainError`, missing or
unreadable files) print one line ``Error: …`` and exit 1; usage errors exit 2
(Click's rule); Ctrl-C exits 130; tracebacks appear only with ``-v``.
"""

from __future__ import annotations

import gc
import io
import logging
import os
import sys

# numpy's OpenBLAS starts a thread at import that does not block signals: a Ctrl-C the kernel
# hands to it sets Python's flag but leaves the main thread's blocking read (a FIFO, a
# stalled disk) uninterrupted, and the command hangs. asrtrain's numpy work is small; its
# heavy products run in torch, whose threads are set per command (--threads).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from typing import Any

import click

from asrtrain import __version__
from asrtrain.cli.lazy import LazyGroup

#: Exit status after Ctrl-C: 128 + SIGINT, as a shell reports it.
INTERRUPTED = 130

COMMANDS = {
    "prepare": "asrtrain.cli.prepare:prepare",
    "train": "asrtrain.cli.train:train",
    "train-seq": "asrtrain.cli.train_seq:train_seq",
    "decode": "asrtrain.cli.decode:decode",
    "score": "asrtrain.cli.score:score",
    "export": "asrtrain.cli.export:export",
    "transcribe": "asrtrain.cli.transcribe:transcribe",
    "rescore": "asrtrain.cli.rescore:rescore",
    "info": "asrtrain.cli.info:info",
    "plot": "asrtrain.cli.plot:plot",
    "study": "asrtrain.cli.study:study",
}


class RootGroup(LazyGroup):
    """Turns expected exceptions from any subcommand into one-line errors."""

    def invoke(self, ctx: click.Context) -> Any:
        from asrtrain.core.errors import AsrtrainError, one_line

        try:
            return super().invoke(ctx)
        except AsrtrainError as exc:
            _reraise_if_verbose(ctx)
            error = click.ClickException(one_line(exc))
            error.exit_code = exc.exit_code  # type: ignore[misc]  # 75: requeue a preempted run
            raise error from None
        except OSError as exc:
            _reraise_if_verbose(ctx)
            where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
            raise click.ClickException(f"{where}{exc.strerror or one_line(exc)}") from None
        except KeyboardInterrupt:
            _reraise_if_verbose(ctx)
            error = click.ClickException("interrupted (Ctrl-C)")
            error.exit_code = INTERRUPTED  # type: ignore[misc]
            raise error from None


def _reraise_if_verbose(ctx: click.Context) -> None:
    if (ctx.obj or {}).get("verbose", 0) > 0:
        import traceback

        traceback.print_exc(file=sys.stderr)


def setup_logging(verbose: int, log_file: str | None) -> None:
    """Console logging on stderr (INFO, DEBUG with -v) and an optional log file."""
    from asrtrain.core.runlog import LOG_FORMAT

    logger = logging.getLogger("asrtrain")
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    for h in list(logger.handlers):
        if getattr(h, "_asrtrain_root", False):
            logger.removeHandler(h)
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
    console.setLevel(logging.DEBUG if verbose else logging.INFO)
    console._asrtrain_root = True  # type: ignore[attr-defined]
    logger.addHandler(console)
    if log_file:
        from asrtrain.core.journal import end_torn_line

        end_torn_line(log_file)  # appended to run after run: a line a killed run cut off is ended first
        fh = logging.FileHandler(log_file, encoding="utf-8")
        fh.setFormatter(logging.Formatter(LOG_FORMAT))
        fh._asrtrain_root = True  # type: ignore[attr-defined]
        logger.addHandler(fh)
    logger.propagate = False


@click.group(cls=RootGroup, lazy_subcommands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(__version__, "--version", prog_name="asrtrain")
@click.option("-v", "--verbose", count=True, help="More logging; tracebacks on errors.")
@click.option("--log-file", type=click.Path(dir_okay=False), default=None,
              help="Also append this run's log to FILE.")
@click.option("--encoding", default=None, envvar="ASRTRAIN_ENCODING", metavar="NAME",
              help="Read text files that are not UTF-8 (data dirs, lexicons, LM text, transcripts, GLMs, "
                   "configs) in this encoding (e.g. latin-1) instead of stopping at the first byte that "
                   "does not decode. [env: ASRTRAIN_ENCODING]")
@click.pass_context
def cli(ctx: click.Context, verbose: int, log_file: str | None, encoding: str | None) -> None:
    """asrtrain: train hybrid BiLSTM-HMM acoustic models (SSGD, ADPSGD, H-ADPSGD) to a WER.

    \b
    Pipeline:  prepare synth | prepare features | prepare archive | prepare lang
               -> train -> decode -> score
    """
    from asrtrain.core.errors import ConfigError
    from asrtrain.core.textio import set_user_encoding

    ctx.ensure_object(dict)
    ctx.obj["verbose"] = verbose
    try:
        set_user_encoding(encoding)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="'--encoding'") from None
    setup_logging(verbose, log_file)


def main() -> None:
    """The console script: :func:`cli`, then :func:`quick_exit` with its status."""
    try:
        cli.main(standalone_mode=True)
        status: int = 0
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if isinstance(exc.code, str):
            sys.stderr.write(exc.code + "\n")
    quick_exit(status)


def quick_exit(status: int) -> None:
    """End the process without the interpreter's teardown, after everything a normal exit does
    for the program's own state: wait for non-daemon threads, run the atexit handlers (logging
    flushes and closes its files, multiprocessing reaps its children, h5py closes files),
    flush every open file object (stdout and stderr last).

    Why: tearing torch down costs about 0.65 s of CPU per command (measured: ``python -c
    "import torch"`` 2.95-3.22 s user, 2.31-2.37 with ``os._exit``), paid by every command
    a recipe runs (about 40 in the yesno recipe) and by every job of a cluster array.
    """
    import atexit
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in _open_files():
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or a full disk: the data is lost either way
            status = status or 1
    os._exit(status)


def _open_files() -> list[Any]:
    """Every open Python file object (stdout and stderr last): a file left open in a global
    is flushed by the teardown skipped here."""
    streams: list[Any] = [sys.stdout, sys.stderr]
    # type(), not isinstance(): isinstance reads __class__, which some objects compute (torch's
    # deprecated reduce_op warns when touched)
    files: list[Any] = [obj for obj in gc.get_objects()
                        if issubclass(type(obj), io.IOBase) and obj not in streams and not obj.closed]
    return files + streams


if __name__ == "__main__":  # pragma: no cover
    main()
