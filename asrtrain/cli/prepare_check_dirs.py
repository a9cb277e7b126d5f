"""``asrtrain prepare check-dirs``: a recipe's train/dev/test data dirs checked together."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option

_DIR = click.Path(exists=True, file_okay=False, path_type=Path)


@click.command("check-dirs")
@config_option
@click.option("--train", type=_DIR, required=True, help="The training data dir.")
@click.option("--dev", type=_DIR, default=None, help="The dev data dir.")
@click.option("--test", "tests", type=_DIR, multiple=True, help="A test data dir (repeatable).")
def check_dirs(train: Path, dev: Path | None, tests: tuple[Path, ...], config: str | None) -> None:
    """Validate the data dirs of a recipe and their separation.

    Refused, with one line naming the speakers and dirs: a dev dir sharing
    speakers with train or a test dir (copies sp0.9-A of a perturbed dir count
    as A). Logged: train and test sharing speakers. Train and dev need a
    transcript in text for every utterance of wav.scp (or segments); a test dir may
    have no text file (its utterances are transcribed, not scored), not a partial one.
    """
    from asrtrain.data.dir_check import check_dirs as check

    for report in check(train, dev, tests):
        text = (f"{report.without_text} without text (transcribed, not scored)"
                if report.without_text else "text for all")
        click.echo(f"{report.role} {report.path}: {report.utterances} utterances, "
                   f"{report.speakers} speaker(s), {text}")
