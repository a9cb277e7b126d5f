"""``asrtrain plot``: training and held-out loss against epoch for one or several runs."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("exps", nargs=-1, required=True,
                type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="PNG file to write.")
@click.option("--label", "labels", multiple=True, help="Legend label per run (default: dir name).")
@click.option("--title", default=None, help="Figure title.")
def plot(exps: tuple[Path, ...], output: Path, labels: tuple[str, ...], title: str | None) -> None:
    """Plot loss (and held-out frame accuracy) against epoch for the runs EXP... into a PNG."""
    from asrtrain.train.plot import plot_runs

    path = plot_runs(list(exps), output, list(labels) or None, title)
    click.echo(f"wrote {path}")
