"""``--elastic``: a learner (or a whole super-learner) SIGKILLed mid-epoch, and the others train on.

The job is ``asrtrain train``'s own call (``jobs.py chunks``, with a hook that logs
every trained chunk and each learner's pid); the test kills one learner from
outside once it is well into epoch 2 (behind ``slow``: four learners, long epochs,
against an undisturbed run), or, in ``make test``, two learners and two short epochs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import chunk_hash  # noqa: E402
from test_cluster_life import _chunks_job, _env  # noqa: E402

from asrtrain.data.archive import Archive  # noqa: E402
from asrtrain.model.io import load_final  # noqa: E402
from asrtrain.train.metrics import read_metrics  # noqa: E402

BLOCK = 8  # jobs.tiny_config's block of chunks


def _blocks(train: Path) -> dict[str, int]:
    """Each chunk's block, by the chunk's features."""
    feats, _ = Archive(train).read_chunks(0, Archive(train).num_chunks)
    return {chunk_hash(torch.from_numpy(np.asarray(f))): i // BLOCK for i, f in enumerate(feats)}


def _log(logs: Path, rank: int) -> list[list[str]]:
    path = logs / f"rank{rank}.log"
    return [line.split() for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _kill_when_in_epoch(logs: Path, victim: int, epoch: int | None, steps: int, proc: subprocess.Popen,
                        how: int = signal.SIGKILL) -> float:
    """Signal learner ``victim`` (SIGKILL, or SIGSTOP for a hung one) once it has logged ``steps``
    chunks of ``epoch`` (``None``: of any epoch); returns when."""
    end = time.monotonic() + 240
    while time.monotonic() < end and proc.poll() is None:
        lines = _log(logs, victim)
        if sum(1 for parts in lines if len(parts) == 3 and parts[0] != "start"
               and (epoch is None or parts[0] == str(epoch))) >= steps:
            pid = int(next(parts for parts in lines if parts[0] == "start")[2])
            os.kill(pid, how)
            return time.time()
        time.sleep(0.02)
    raise AssertionError(f"learner rank {victim} never reached {steps} chunks of epoch {epoch}")


def _trained(logs: Path, ranks: range) -> dict[int, dict[int, Counter]]:
    """epoch -> rank -> Counter of chunk digests that rank trained."""
    out: dict[int, dict[int, Counter]] = defaultdict(lambda: defaultdict(Counter))
    for r in ranks:
        for parts in _log(logs, r):
            if len(parts) == 3 and parts[0] != "start":
                out[int(parts[0])][r][parts[2]] += 1
    return out


def _check_epochs(train: Path, logs: Path, world: int, victims: list[int], killed_epoch: int,
                  epochs: int = 3) -> None:
    """Every block of every epoch trained to its end by exactly one learner, no chunk twice by the
    learners alive; in the epoch of the kill the victims' unfinished blocks were trained again."""
    block_of = _blocks(train)
    sizes = Counter(block_of.values())
    trained = _trained(logs, range(world))
    assert sorted(trained) == list(range(1, epochs + 1))
    for epoch, by_rank in trained.items():
        alive = Counter()
        for r, chunks in by_rank.items():
            if epoch < killed_epoch or r not in victims:
                alive.update(chunks)
        assert max(alive.values()) == 1, f"epoch {epoch}: a chunk trained twice"
        complete = Counter()
        for chunks in by_rank.values():
            per_block = Counter(block_of[d] for d in chunks)
            complete.update(b for b, n in per_block.items() if n == sizes[b])
        unfinished = set(sizes) - set(complete)
        if epoch == killed_epoch and unfinished:
            _check_unlogged_last_step(block_of, by_rank, _largest_step(logs, victims, epoch), victims, unfinished,
                                      epoch)
        else:
            assert not unfinished, f"epoch {epoch}: blocks never trained to their end: {sorted(unfinished)}"
        assert max(complete.values()) == 1, f"epoch {epoch}: a block trained to its end twice"
        if epoch != killed_epoch:
            assert set(alive) == set(block_of), f"epoch {epoch}: chunks missing"


def _check_unlogged_last_step(block_of: dict[str, int], by_rank: dict[int, Counter], largest_step: int,
                              victims: list[int], unfinished: set[int], epoch: int) -> None:
    """A block nobody logged to its end in the epoch of the kill: allowed only as one victim's last step.

    The trainer marks a block finished in the store (the strategy's ``after_step``) before the
    hooks' ``after_step`` writes the chunks to the log, so a SIGKILL between the two leaves a
    step trained and its block done, with no log line. Such chunks are at most one batch of
    that victim's, in the blocks it was training, and no learner alive trained those blocks again.
    """
    logged = set().union(*(set(chunks) for chunks in by_rank.values()))
    missing = [d for d, b in block_of.items() if b in unfinished and d not in logged]
    assert 0 < len(missing) <= largest_step, \
        f"epoch {epoch}: blocks never trained to their end: {sorted(unfinished)} ({len(missing)} chunks unlogged)"
    survivors = set().union(*(set(c) for r, c in by_rank.items() if r not in victims))
    assert not {block_of[d] for d in survivors} & unfinished, \
        f"epoch {epoch}: blocks {sorted(unfinished)} handed out again but not trained to their end"


def _largest_step(logs: Path, ranks: list[int], epoch: int) -> int:
    """The most chunks these learners logged in one step of ``epoch`` (one batch)."""
    steps = Counter((r, parts[1]) for r in ranks for parts in _log(logs, r)
                    if len(parts) == 3 and parts[0] == str(epoch))
    return max(steps.values(), default=0)


def _elastic_run(long_archives, tmp_path: Path, strategy: str, victims: list[int], *options: str,
                 how: int = signal.SIGKILL) -> dict:
    train, valid = long_archives
    common = ("--epochs", "3", "--batch", "12", "--valid", str(valid), "--every", "1000", *options)
    ref_logs, logs = tmp_path / "ref_logs", tmp_path / "logs"
    ref_logs.mkdir()
    logs.mkdir()
    ref = subprocess.run(_chunks_job(train, tmp_path / "ref", ref_logs, strategy, 4, *common), env=_env(),
                         capture_output=True, text=True, timeout=600)
    assert ref.returncode == 0, ref.stderr[-3000:]
    job = subprocess.Popen(_chunks_job(train, tmp_path / "exp", logs, strategy, 4, *common, "--elastic"),
                           env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    killed_at = _kill_when_in_epoch(logs, victims[0], epoch=2, steps=30, proc=job, how=how)
    out, _ = job.communicate(timeout=600)
    assert job.returncode == 0, out[-3000:]  # the others finished the run: no restart
    rows = read_metrics(tmp_path / "exp" / "metrics.jsonl")
    ref_rows = read_metrics(tmp_path / "ref" / "metrics.jsonl")
    return {"out": out, "rows": rows, "ref_rows": ref_rows, "killed_at": killed_at, "logs": logs, "train": train}


def _epochs(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["kind"] == "epoch"]


def _last_epoch(logs: Path, rank: int) -> int:
    """The epoch of the last chunk ``rank`` trained (the one it was killed in, or the one before)."""
    return max(int(parts[0]) for parts in _log(logs, rank) if len(parts) == 3 and parts[0] != "start")


def test_adpsgd_learner_killed_mid_run_the_other_finishes_and_names_it(archives, tmp_path):
    """The fast case (2 learners, the 60-utterance archive, 2 short epochs): the launcher sees the
    process end and declares it gone at once (no timeout waited), the survivor trains the blocks
    it held and every later one, and writes the model and the departure in its metrics and log."""
    train, valid = archives
    logs, exp, console = tmp_path / "logs", tmp_path / "exp", tmp_path / "console.txt"
    logs.mkdir()
    with console.open("w") as sink:  # a file, not a pipe: no waiting for the forkserver's exit to close it
        job = subprocess.Popen(_chunks_job(train, exp, logs, "adpsgd", 2, "--epochs", "2", "--every", "1000",
                                           "--valid", str(valid), "--elastic"),
                               env=_env(), stdout=sink, stderr=subprocess.STDOUT)
        _kill_when_in_epoch(logs, 1, epoch=None, steps=6, proc=job)  # 3 steps of 2 chunks: early in epoch 1
        job.wait(timeout=300)
    out = console.read_text()
    assert job.returncode == 0, out[-3000:]
    rows = read_metrics(exp / "metrics.jsonl")
    assert [r["epoch"] for r in _epochs(rows)] == [1, 2]
    left = [r for r in rows if r["kind"] == "event" and r["event"] == "learner left"]
    assert [e["rank"] for e in left] == [1], left
    assert "learner rank 1 died (SIGKILL)" in out, out[-3000:]  # the launcher's line in the job's log
    assert "gone [1]" in (exp / "log" / "train.rank0.log").read_text()  # and the survivor's own log
    assert load_final(exp / "final.pt").model is not None
    _check_epochs(train, logs, 2, [1], killed_epoch=_last_epoch(logs, 1), epochs=2)


@pytest.mark.slow  # two runs of 4 learners (~60 s; ~90 s with the hung learner's timeout)
@pytest.mark.parametrize("how,within,loss_rel", [(signal.SIGKILL, 5.0, 0.05), (signal.SIGSTOP, 45.0, 0.15)],
                         ids=["killed", "hung"])
def test_adpsgd_learner_lost_mid_epoch_the_others_finish(long_archives, tmp_path, how, within, loss_rel):
    """Killed: the launcher sees the process end. Hung (SIGSTOP): its heartbeat stops and it is declared
    gone after the timeout (20 s), during which its partners' rounds wait: more drift, a wider margin."""
    run = _elastic_run(long_archives, tmp_path, "adpsgd", [2], how=how)
    rows, ref = _epochs(run["rows"]), _epochs(run["ref_rows"])
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    left = [r for r in run["rows"] if r["kind"] == "event" and r["event"] == "learner left"]
    assert [(e["rank"], e["epoch"]) for e in left] == [(2, 2)]
    rehanded = [r for r in run["rows"] if r["kind"] == "event" and r["event"] == "blocks handed out again"]
    assert rehanded and all(e["epoch"] == 2 and e["blocks"] for e in rehanded)
    detected = left[0]["time"] - run["killed_at"]
    print(f"ADPSGD: learner 2 ({signal.Signals(how).name}) declared gone {detected:.2f} s after; re-handed blocks "
          f"{[b for e in rehanded for b in e['blocks']]}; held-out loss {rows[-1]['valid_loss']:.4f} "
          f"vs {ref[-1]['valid_loss']:.4f} undisturbed")
    assert 0 <= detected < within
    _check_epochs(run["train"], run["logs"], 4, [2], killed_epoch=2)
    assert rows[-1]["valid_loss"] == pytest.approx(ref[-1]["valid_loss"], rel=loss_rel)
    assert rows[2]["train_frames"] == ref[2]["train_frames"]  # the last epoch: three learners, every frame once


@pytest.mark.slow  # two runs of 4 learners (~60 s)
def test_h_adpsgd_super_learner_lost_the_other_finishes(long_archives, tmp_path):
    # rank 3 is killed; its sibling rank 2 cannot step alone and leaves: super-learner 1 is lost
    run = _elastic_run(long_archives, tmp_path, "h-adpsgd", [3, 2], "--group-size", "2")
    rows, ref = _epochs(run["rows"]), _epochs(run["ref_rows"])
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    left = sorted(r["rank"] for r in run["rows"] if r["kind"] == "event" and r["event"] == "learner left")
    assert left == [2, 3]
    _check_epochs(run["train"], run["logs"], 4, [2, 3], killed_epoch=2)
    print(f"H-ADPSGD: held-out loss {rows[-1]['valid_loss']:.4f} vs {ref[-1]['valid_loss']:.4f} undisturbed")
    # The one super-learner left trains epoch 3 alone, without the epoch-end average of two, and the
    # undisturbed run itself varies with the scheduling: over 10 runs 0.0266-0.0302 against 0.0266-0.0283,
    # a ratio of 0.97-1.13 (3 of 10 beyond the 5% this asked before)
    assert rows[-1]["valid_loss"] == pytest.approx(ref[-1]["valid_loss"], rel=0.2)
