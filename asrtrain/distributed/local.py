"""``--nproc N``: start N learner processes on this machine, and decide what their exits mean.

Why not torch's elastic agent: it stops every worker as soon as one fails, and on
SIGTERM it stops them itself, so neither a learner that dies under ``--elastic``
(the survivors must train on) nor a preempted job (every learner finishes its step
and checkpoints, and the job exits with the requeue status) can be expressed. This
launcher hosts the rendezvous store (so any learner, rank 0 too, may die without
taking the store along), starts the workers, forwards SIGTERM, SIGUSR1 and SIGINT to
them, and collects each one's result or error:

* a learner that fails ends the job (the others are killed, so a stopped learner
  cannot hold it): one error naming every failed rank and why, unless ``elastic``,
  where the job succeeds if the survivors do;
* learners that stop for a preemption make the job raise :class:`Preempted`.

Learners are forked by a ``forkserver`` that has imported torch and the learner's code
once (:data:`PRELOAD`): a spawned learner imports them itself, about 6 s of CPU each on these
cores, so four learners cost half a minute before their first step (measured: two tests of
four learners, 60.6 s of CPU spawned against 40.3 s). A fork of the server starts with the
server's directory and environment, so each learner takes the launcher's own first.

Each learner reports through a pipe of its own, not a ``multiprocessing.Queue``: a
queue's locks are named semaphores in ``/dev/shm`` that a job killed as a group
(SIGKILL to the process group) leaves behind.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

from asrtrain.core.errors import AsrtrainError, Preempted, one_line

log = logging.getLogger("asrtrain.distributed")

FORWARDED = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
#: What the forkserver imports once for every learner: the trainer, and what a learner imports
#: later on its own: h5py (the archive) and torch._dynamo (with sympy: torch's optimizers import
#: it when built). Imported in each learner instead, they cost about 2.5 s of CPU per learner on
#: these cores (test_failures' two 4-learner jobs and the 2-learner preemption test: 59.6 s of
#: CPU in all against 34.4 s preloaded). Importing them starts no thread: the server may fork.
PRELOAD = ("asrtrain.train.run", "h5py", "torch._dynamo")


#: How often a learner looks whether its launcher still lives.
LAUNCHER_POLL_S = 2.0


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited: its state in /proc, since a killed
    launcher not yet reaped (a zombie) still answers ``os.kill(pid, 0)``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _watch_launcher(pid: int) -> None:
    """Stop this learner as a preemption does (SIGTERM to itself) once the launcher is gone:
    killed with SIGKILL it forwards nothing, and its learners trained on with no one to report to."""
    import threading

    def watch() -> None:
        while _alive(pid):
            time.sleep(LAUNCHER_POLL_S)
        log.warning("the launcher (pid %d) is gone: this learner stops as if preempted", pid)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="launcher-watch", daemon=True).start()


def _child(rank: int, nproc: int, port: int, fn: Callable[..., Any], args: tuple[Any, ...],
           report: Any, env: dict[str, str], cwd: str, launcher: int) -> None:
    """One learner: the launcher's directory and environment, then ``fn(*args)``; its outcome
    goes to ``report``. It stops when the ``launcher`` process is gone."""
    _watch_launcher(launcher)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(nproc), LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(nproc),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCHELASTIC_USE_AGENT_STORE="True",
                      ASRTRAIN_LAUNCHER="nproc")
    try:
        _send(report, ("ok", fn(*args)))
    except Preempted as exc:
        _send(report, ("preempted", str(exc)))
        raise SystemExit(Preempted.exit_code) from None
    except BaseException as exc:  # noqa: BLE001 - reported to the launcher, which names the rank
        _send(report, ("error", one_line(exc)))
        raise SystemExit(1) from None
    finally:
        report.close()


def _send(report: Any, outcome: tuple[str, Any]) -> None:
    """Tell the launcher how this learner ended, unless it is gone (its end of the pipe closed)."""
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        report.send(outcome)


@contextlib.contextmanager
def _forwarding(procs: list[Any]) -> Iterator[None]:
    """Pass SIGTERM, SIGUSR1 and SIGINT on to the learners while they run (main thread only)."""
    def forward(signum: int, _frame: Any) -> None:
        log.warning("signal %d: passed on to the %d learners", signum, sum(p.is_alive() for p in procs))
        for p in procs:
            if p.is_alive() and p.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signum)

    try:
        old = {s: signal.signal(s, forward) for s in FORWARDED}
    except ValueError:  # not the main thread: signals stay where they are
        yield
        return
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


def launch_local(nproc: int, fn: Callable[..., Any], args: tuple[Any, ...], run_id: str = "asrtrain",
                 elastic: bool = False, timeout_s: float = 300.0) -> dict[int, Any]:
    """Run ``fn(*args)`` in ``nproc`` local processes; returns each rank's return value.

    Without ``elastic`` a failed learner stops the others and the call raises an
    :class:`AsrtrainError` naming every failed rank; with it, failed learners are
    logged and the survivors' results returned (the error is raised only if no
    learner succeeded). ``run_id`` names the job in the log.
    """
    import torch.multiprocessing as mp
    from torch.distributed import TCPStore

    from asrtrain.distributed.launch import free_port

    port = free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,  # noqa: F841 - held open
                     timeout=timedelta(seconds=timeout_s))
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([*PRELOAD, fn.__module__])  # if it starts now
    pipes = [ctx.Pipe(duplex=False) for _ in range(nproc)]
    env, cwd = dict(os.environ), os.getcwd()
    procs = [ctx.Process(target=_child, args=(r, nproc, port, fn, args, pipes[r][1], env, cwd, os.getpid()),
                         name=f"{run_id}-{r}") for r in range(nproc)]
    outcome: dict[int, tuple[str, Any]] = {}
    with _forwarding(procs):
        for p in procs:
            p.start()
        for _, sender in pipes:
            sender.close()  # the children hold them: a pipe reads end-of-file when its learner is gone
        readers = {reader: rank for rank, (reader, _) in enumerate(pipes)}
        failed = _wait(procs, readers, outcome, elastic, _Departures(store) if elastic else None)
    return _result(procs, outcome, failed, elastic)


class _Departures:
    """Under ``--elastic`` the launcher tells the learners at once that one of them ended, and ends
    the ones they declared gone (a stopped learner must not hold the job open)."""

    def __init__(self, store: Any) -> None:
        from torch.distributed import PrefixStore

        self.store = PrefixStore("asrtrain", store)  # the learners' own prefix (launch.init_worker)

    def ended(self, rank: int, why: str) -> None:
        from asrtrain.distributed.membership import announce_gone

        announce_gone(self.store, rank, why)

    def declared(self, rank: int) -> bool:
        return bool(self.store.check([f"members/gone/{rank}"]))


def _wait(procs: list[Any], readers: dict[Any, int], outcome: dict[int, tuple[str, Any]], elastic: bool,
          departures: _Departures | None = None) -> list[int]:
    """Collect outcomes until every learner has exited; returns the failed ranks in order of failure.

    Learners killed because another failed count as failed only if they said why first.
    """
    from multiprocessing.connection import wait

    failed: list[int] = []
    stopping = False
    while any(p.is_alive() for p in procs) or readers:
        ready: list[Any] = wait(list(readers), timeout=0.1)
        for reader in ready:
            rank = readers[reader]
            try:
                outcome[rank] = reader.recv()
            except (EOFError, OSError):  # the learner ended without a word (killed)
                del readers[reader]
        for rank, p in enumerate(procs):
            if departures is not None and p.is_alive() and departures.declared(rank):
                p.kill()  # declared gone by the others (hung, cut off): it must not hold the job open
                p.join()
            kind = outcome.get(rank, ("",))[0]
            if p.exitcode in (None, 0) or rank in failed or kind == "preempted" or (stopping and kind != "error"):
                continue
            failed.append(rank)
            if departures is not None:
                departures.ended(rank, f"its process ended (exit status {p.exitcode})")
            if not elastic and not stopping:
                stopping = True
                _kill_others(procs, rank)
    for p in procs:
        p.join()
    return failed


def _kill_others(procs: list[Any], first: int) -> None:
    """A failed learner ends the job: the others go at once (a stopped one would never finish)."""
    time.sleep(0.5)  # let a learner that noticed the failure too report why
    for rank, p in enumerate(procs):
        if rank != first and p.is_alive():
            p.kill()


def _result(procs: list[Any], outcome: dict[int, tuple[str, Any]], failed: list[int],
            elastic: bool) -> dict[int, Any]:
    if any(kind == "preempted" for kind, _ in outcome.values()) and not failed:
        raise Preempted(next(v for k, v in outcome.values() if k == "preempted"))
    if failed and (not elastic or len(failed) == len(procs)):
        raise AsrtrainError(describe_failures(failed, procs, outcome))
    if failed:
        log.warning("learners that left the job: %s", describe_failures(failed, procs, outcome))
    return {r: v for r, (kind, v) in outcome.items() if kind == "ok"}


def describe_failures(failed: list[int], procs: list[Any], outcome: dict[int, tuple[str, Any]]) -> str:
    """One line naming every failed rank with its error, or how its process ended."""
    parts = []
    for rank in failed:
        kind, value = outcome.get(rank, ("", ""))
        code = procs[rank].exitcode
        if kind == "error":
            parts.append(f"learner rank {rank}: {value}")
        elif code is not None and code < 0:
            parts.append(f"learner rank {rank} died ({signal.Signals(-code).name})")
        else:
            parts.append(f"learner rank {rank} exited with status {code}")
    return "; ".join(parts) if parts else "a learner failed"
