"""Writing a sharded archive: each shard a job, the manifest written last.

The sorted utterances are cut into N contiguous runs of near-equal counts (as
Kaldi's ``split_data.sh`` splits by ``--nj``); shard k (1-based) is the archive of
run k, ``train.k.h5`` beside the manifest ``train.json``. One command writes all
of them in ``nj`` local processes; on a cluster each array job writes one
(``--shard K``) and whichever finds every shard complete writes the manifest. The
manifest appears, atomically, only once every shard is complete and agrees with
the others: until then nothing reads as a finished archive. See
:mod:`asrtrain.data.shards` for the reader.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from pathlib import Path
from typing import Any

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.archive import Archive
from asrtrain.data.shards import (
    MANIFEST_FORMAT,
    MANIFEST_SUFFIX,
    MANIFEST_VERSION,
    SHARED_ATTRS,
    shard_path,
    shard_record,
)

log = logging.getLogger("asrtrain.archive")


def default_jobs(shards: int) -> int:
    """Local processes when ``--nj`` is not given: a shard each, up to the cores this process may use."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(shards, cores))


def write_sharded(manifest: str | os.PathLike[str], streams: list[Any], ali_scp: str | None = None,
                  num_pdfs: int | None = None, utt2spk: dict[str, str] | None = None,
                  shards: int = 2, nj: int | None = None, only: int | None = None,
                  log_dir: Path | None = None, **archive_kw: Any) -> dict[str, Any]:
    """Write the ``shards`` shards of ``manifest`` (only shard ``only``, 1-based, if given) in
    ``nj`` processes, then the manifest when every shard is there. ``archive_kw``: of
    :func:`~asrtrain.data.archive_writer.write_archive` (chunk, tolerance, options, ...)."""
    manifest = Path(manifest)
    if manifest.suffix != MANIFEST_SUFFIX:
        raise ConfigError(f"a sharded archive is named by its manifest, OUT{MANIFEST_SUFFIX} "
                          f"(its shards are OUT.1.h5 ...), got {manifest}")
    if shards < 1 or (only is not None and not 1 <= only <= shards):
        raise ConfigError(f"--shard {only} outside 1..{shards} (--shards {shards})")
    manifest.unlink(missing_ok=True)  # its shards are about to change
    plain = [dataclasses.replace(s, _reader=None) for s in streams]  # nothing open crosses a process
    todo = [only] if only is not None else list(range(1, shards + 1))
    jobs = [(manifest, k, shards, plain, ali_scp, num_pdfs, utt2spk, log_dir, archive_kw) for k in todo]
    nj = default_jobs(len(jobs)) if nj is None else nj
    if nj <= 1 or len(jobs) == 1:
        summaries = [_shard_job(*job) for job in jobs]
    else:
        from asrtrain.core.workers import run_workers

        summaries = run_workers(_shard_job, jobs, nj)
    done = write_manifest(manifest, shards, complete=only is None)
    return _summary(manifest, summaries, done)


def _shard_job(manifest: Path, k: int, n: int, streams: list[Any], ali_scp: str | None,
               num_pdfs: int | None, utt2spk: dict[str, str] | None, log_dir: Path | None,
               archive_kw: dict[str, Any], report: Any = None) -> dict[str, Any]:
    """One shard (a job: in this process or a worker), logged to its own file under ``log_dir``."""
    from asrtrain.data.archive_writer import write_archive

    handler = None
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(log_dir / f"{shard_path(manifest, k).name}.log", encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logging.getLogger("asrtrain").addHandler(handler)
        logging.getLogger("asrtrain").setLevel(logging.INFO)
    try:
        return write_archive(shard_path(manifest, k), streams, ali_scp, num_pdfs, utt2spk,
                             part=(k - 1, n), **archive_kw)
    finally:
        if handler is not None:
            logging.getLogger("asrtrain").removeHandler(handler)
            handler.close()


def write_manifest(manifest: Path, shards: int, complete: bool = True) -> bool:
    """Write ``manifest`` over shards 1..``shards`` once all are there and agree (atomically).

    ``complete``: every shard should be there now (one command wrote them); else a missing
    or disagreeing shard (another array job still writing) is logged and False returned.
    """
    from asrtrain.core.atomic import write_text

    paths = [shard_path(manifest, k) for k in range(1, shards + 1)]
    missing = [p.name for p in paths if not p.is_file()]
    try:
        if missing:
            raise InputError(f"{len(missing)} of {shards} shards not written ({', '.join(missing[:4])}"
                             f"{' ...' if len(missing) > 4 else ''}): no manifest yet", manifest)
        found = [Archive(p) for p in paths]
        check_split(found, shards)
    except InputError as exc:
        if complete:
            raise
        log.info("%s", exc)
        return False
    records = [shard_record(s) for s in found]
    if not sum(r["utterances"] for r in records):
        raise InputError("no utterance could be used in any shard (see each shard's skipped "
                         "utterances: asrtrain info SHARD)", manifest)
    data = {"format": MANIFEST_FORMAT, "format_version": MANIFEST_VERSION,
            "written": max(str(r["written"]) for r in records),
            "chunks": sum(r["chunks"] for r in records), "frames": sum(r["frames"] for r in records),
            "utterances": sum(r["utterances"] for r in records), "shards": records}
    write_text(manifest, json.dumps(data, indent=1) + "\n")
    for s in found:
        s.close()
    return True


def check_split(found: list[Archive], shards: int) -> None:
    """The shards are runs 1..N of one split of one utterance list, written with one layout."""
    expected_first = 0
    head = found[0].h5.attrs
    base = json.loads(head.get("split", "{}"))
    for k, shard in enumerate(found, 1):
        attrs = shard.h5.attrs
        split = json.loads(attrs.get("split", "{}"))
        if (attrs.get("shard"), attrs.get("shards")) != (k, shards):
            raise InputError(f"is shard {attrs.get('shard')} of {attrs.get('shards')}, not {k} of "
                             f"{shards} (another split's; write it again)", shard.path)
        if (split.get("digest"), split.get("utterances")) != (base.get("digest"), base.get("utterances")) \
                or split.get("first") != expected_first:
            raise InputError(f"shard {k} was split from other utterances than shard 1 (another "
                             "run's inputs; write it again)", shard.path)
        for key in SHARED_ATTRS:
            if attrs.get(key) != head.get(key):
                raise InputError(f"shard {k} has another {key} than shard 1; write it again", shard.path)
        expected_first = split.get("stop")
    if expected_first != base.get("utterances"):
        raise InputError(f"the shards cover {expected_first} of {base.get('utterances')} utterances",
                         found[-1].path)


def _summary(manifest: Path, parts: list[dict[str, Any]], done: bool) -> dict[str, Any]:
    """The jobs' summaries added up (as :func:`write_archive` returns one)."""
    skipped: dict[str, str] = {}
    for part in parts:
        skipped.update(part["skipped"])
    return {"path": str(manifest), "manifest": done, "shards": [p["path"] for p in parts],
            "utterances": sum(p["utterances"] for p in parts), "frames": sum(p["frames"] for p in parts),
            "chunks": sum(p["chunks"] for p in parts), "feat_dim": parts[0]["feat_dim"],
            "skipped": skipped, "layout": parts[0]["layout"],
            "unaligned": [u for p in parts for u in p["unaligned"]]}
