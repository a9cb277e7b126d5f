"""``asrtrain info``: what an archive holds, as a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click


@click.command()
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--skipped", "show_skipped", type=click.IntRange(0), default=10, show_default=True,
              help="How many skipped utterances to list.")
def info(archive: Path, show_skipped: int) -> None:
    """Describe the archive ARCHIVE (.h5, or a shard manifest .json): sizes, stream layout, targets,
    skipped utterances."""
    from rich.console import Console

    from asrtrain.data.shards import open_archive

    with open_archive(archive) as arc:
        Console().print(*describe(arc, show_skipped))


def describe(arc: Any, show_skipped: int = 10) -> list[Any]:
    """Rich tables of an :class:`~asrtrain.data.archive.Archive`: summary, layout, skipped."""
    import numpy as np
    from rich.table import Table

    head = arc.header
    frames, chunks, chunk = arc.num_frames, arc.num_chunks, arc.chunk
    fp = head.get("fingerprint", {})
    summary = Table(title=str(arc.path), show_header=False)
    summary.add_column("", style="bold")
    summary.add_column("")
    rows = [
        ("format", f"{head.get('format')} v{head.get('format_version')}"),
        ("utterances", f"{len(arc.utterances):,}"),
        ("frames", f"{frames:,} ({frames / 360000:.2f} h at 10 ms)"),
        ("chunks", f"{chunks:,} of {chunk} frames ({1 - frames / max(chunks * chunk, 1):.1%} padding)"),
        ("feature dim", str(arc.feat_dim)),
        ("targets", "none (decoding archive)" if not arc.has_targets else
         f"{arc.num_pdfs:,} pdfs, {int(np.count_nonzero(arc.priors)):,} seen"),
        ("skipped", f"{len(arc.skipped):,} utterances"
                    + (f"; {int(head['num_unaligned']):,} kept without an alignment (targets ignored)"
                       if head.get("num_unaligned") else "")),
        ("storage", f"{arc.storage_chunks} chunks per HDF5 chunk, "
                    f"{arc.nbytes / 2**20:,.1f} MiB"
                    + (f", shard {head['shard']} of {head['shards']}" if head.get("shard")
                       else f" in {head['shards']} shards" if head.get("shards") else "")),
        ("written", f"{fp.get('written', '?')} by asrtrain "
                    f"{(fp.get('packages') or {}).get('asrtrain', '?')} ({fp.get('git_commit')})"),
    ]
    for key, value in rows:
        summary.add_row(key, value)
    layout = Table(title="input layout")
    for column in ("stream", "columns", "dim", "kind", "mean (avg)", "std (avg)", "source"):
        layout.add_column(column, justify="right" if column in ("dim",) else "left")
    mean, std = arc.mean, np.sqrt(arc.var)
    for s in arc.layout:
        cols = slice(s["offset"], s["offset"] + s["dim"])
        kind = s.get("kind", "")
        if s.get("period"):
            kind += f" /{s['period']}"
        if s.get("cmvn"):
            kind += f", cmvn {s['cmvn']}"
        layout.add_row(s["name"], f"{s['offset']}–{s['offset'] + s['dim'] - 1}", str(s["dim"]),
                       kind, f"{float(mean[cols].mean()):.3g}", f"{float(std[cols].mean()):.3g}",
                       str(s.get("scp", "")))
    out: list[Any] = [summary, layout]
    if arc.skipped and show_skipped:
        skipped = Table(title=f"skipped utterances (first {min(show_skipped, len(arc.skipped))} "
                              f"of {len(arc.skipped)})")
        skipped.add_column("utterance")
        skipped.add_column("reason")
        for utt, reason in arc.skipped[:show_skipped]:
            skipped.add_row(utt, reason)
        out.append(skipped)
    return out
