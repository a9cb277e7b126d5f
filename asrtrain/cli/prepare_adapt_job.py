"""``asrtrain prepare adapt-job``: one job of ``prepare fmllr`` / ``prepare ivectors --job-cmd``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(hidden=True)
@click.argument("spec", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("job", type=click.IntRange(1))
def adapt_job(spec: Path, job: int) -> None:
    """Job JOB of the pass SPEC (OUT/jobs/<stage>.pkl): its answer beside SPEC."""
    from asrtrain.adapt.job_cmd import run_job

    run_job(spec, job)
