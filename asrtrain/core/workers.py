"""Jobs in worker processes that leave nothing behind, whatever ends them.

Feature extraction and decoding split their work into jobs, each run in a fresh
``spawn``-ed process (libraries that keep global state, HDF5 handles, torch's
threads). Each job reports through a pipe of its own: ``multiprocessing`` queues
and pools hold named semaphores in ``/dev/shm`` that stay there when the command is
killed as a process group (a batch system's SIGKILL), which pipes do not. A job that
fails ends the others; its error names the job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from asrtrain.core.errors import AsrtrainError, one_line


def _child(target: Callable[..., Any], args: tuple[Any, ...], conn: Any) -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the jobs
    try:
        conn.send(("done", target(*args, report=lambda message: conn.send(("message", message)))))
    except AsrtrainError as exc:
        conn.send(("error", str(exc)))
    except BaseException as exc:  # noqa: BLE001 - a bug: keep its type in the message
        conn.send(("error", f"{type(exc).__name__}: {one_line(exc)}"))
    finally:
        conn.close()


def run_workers(target: Callable[..., Any], jobs: Sequence[tuple[Any, ...]], limit: int,
                on_message: Callable[[int, Any], None] | None = None,
                names: Sequence[str] | None = None, method: str = "spawn",
                preload: Sequence[str] = ()) -> list[Any]:
    """``target(*job, report=…)`` for every job, ``limit`` processes at a time; their results in order.

    ``report(message)`` in a job calls ``on_message(job_index, message)`` here (progress).
    ``names[i]`` names job i in an error (default ``job i``). ``method`` ``forkserver``
    (with the modules ``preload`` imported once) starts a job in milliseconds, not the
    seconds of a ``spawn``-ed interpreter importing torch.
    """
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx: Any = mp.get_context(method)
    if method == "forkserver" and preload:
        ctx.set_forkserver_preload(list(preload))   # if the server starts now

    def name(index: int) -> str:
        return names[index] if names is not None else f"job {index}"
    results: dict[int, Any] = {}
    running: dict[Any, tuple[int, Any]] = {}  # reading end -> (job index, process)
    pending = list(enumerate(jobs))
    try:
        while pending or running:
            while pending and len(running) < max(limit, 1):
                index, args = pending.pop(0)
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(target, args, writer), daemon=True)
                proc.start()
                writer.close()
                running[reader] = (index, proc)
            ready: list[Any] = wait(list(running), timeout=1.0)
            for reader in ready:
                index, proc = running[reader]
                try:
                    kind, payload = reader.recv()
                except (EOFError, OSError):
                    proc.join()
                    del running[reader]
                    if index not in results:
                        raise AsrtrainError(f"{name(index)} died (exit status {proc.exitcode})") from None
                    continue
                if kind == "message" and on_message is not None:
                    on_message(index, payload)
                elif kind == "done":
                    results[index] = payload
                elif kind == "error":
                    raise AsrtrainError(f"{name(index)}: {payload}")
    finally:
        for _, proc in running.values():
            with contextlib.suppress(Exception):
                if proc.is_alive():
                    proc.terminate()
                proc.join()
    return [results[i] for i in range(len(jobs))]


def split_by_frames(utts: list[tuple[str, int]], nj: int) -> list[list[str]]:
    """Contiguous groups with about equal frames (outputs stay in utterance order)."""
    total = sum(n for _, n in utts) or 1
    jobs: list[list[str]] = [[] for _ in range(nj)]
    done = 0
    for utt, n in utts:
        j = min(int(done * nj / total), nj - 1)
        jobs[j].append(utt)
        done += n
    return jobs
