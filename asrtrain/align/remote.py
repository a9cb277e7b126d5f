"""Alignment jobs on other hosts: each started by a job command and connected back over TCP.

``prepare align --nj N --job-cmd CMD`` listens on ``--listen`` (multiprocessing's
connections: pickles over a socket, both ends proving they hold the random key
written 0600 as ``OUT/.align-worker.key``) and starts job J as ``CMD <python> -m
asrtrain.cli.main prepare align-worker --connect HOST:PORT --job J --authkey-file
KEY``, its output appended to ``OUT/log/align-worker.J.log``. CMD is what runs one
command somewhere: ``srun --ntasks=1``, a site's wrapper, ``env`` for this host.

The N jobs are started once and serve the whole run: for each ``Jobs`` of the parent
(the training speakers, the monophones' subset, each split) a job is told a data dir,
its utterances (whole speakers) and the lexicon's pronunciations, reads those
utterances' features and transcripts itself from the shared data dir
(``feats.load_utterances(only=...)``, the parent's own code), builds their DAGs,
answers the calls a forkserver job answers (``shard.serve``) and frees them when that
``Jobs`` closes. So a scheduler queues N jobs once, not N
per split.

A job that cannot start, exits before connecting or does not connect within
``--connect-timeout`` is one error line naming it, its host (from its log's first
line) and its log; so is one whose connection is lost later. Ctrl-C or SIGTERM of
the parent ends every job (their process groups, and each worker also ends by itself
within a second when the parent's side of its connection closes).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from asrtrain.core.errors import AsrtrainError, ConfigError

log = logging.getLogger("asrtrain.align")

#: Seconds a started job has to connect (a scheduler's queue wait included).
CONNECT_TIMEOUT = 900.0
KEY_NAME = ".align-worker.key"
#: The worker's first log line; the parent reads the host from it when the job fails.
HELLO_LINE = "align-worker: job {job} on {host} pid {pid}: connecting to {address}"
_HELLO_RE = re.compile(r"align-worker: job (\d+) on (\S+) pid (\d+)")


@dataclass
class Launch:
    """Where the jobs run: the job command (shell words), the listen address, OUT."""

    command: str
    out: Path
    listen: str | None = None          # HOST or HOST:PORT; None: default_host()
    timeout: float = CONNECT_TIMEOUT


class Terminated(AsrtrainError):
    """The parent was sent SIGTERM: its jobs are ended, nothing is left looking complete."""

    exit_code = 128 + signal.SIGTERM


def parse_address(text: str, what: str = "--listen") -> tuple[str, int]:
    """``HOST`` or ``HOST:PORT`` (port 0: any free one)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        return text, 0
    if not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{what} {text!r}: expected HOST or HOST:PORT")
    return host, int(port)


def default_host() -> str:
    """This host's name where it resolves to an address other hosts can reach (a
    cluster node's), else 127.0.0.1 (a laptop whose name is a loopback alias)."""
    name = socket.gethostname()
    try:
        addr = socket.gethostbyname(name)
    except OSError:
        return "127.0.0.1"
    return "127.0.0.1" if addr.startswith("127.") else name


def _status(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


@dataclass
class RemoteJob:
    """The parent's handle on one started job: its launcher process, log, connection."""

    job: int
    log: Path
    proc: subprocess.Popen[bytes]
    address: str
    start: int = 0                     # where this job's lines begin in its (appended) log
    conn: Connection | None = None
    host: str | None = None
    cpu: float = 0.0

    def name(self) -> str:
        host = self.host or self._logged_host() or "an unknown host (it never said hello)"
        return f"alignment job {self.job} on {host}"

    def _logged_host(self) -> str | None:
        """The host of this job's last hello line in its log (None: it never wrote one)."""
        hosts = [m.group(2) for m in map(_HELLO_RE.search, self._log_lines())
                 if m and int(m.group(1)) == self.job]
        return hosts[-1] if hosts else None

    def _log_lines(self) -> list[str]:
        try:
            with open(self.log, "rb") as fh:
                fh.seek(self.start)
                return fh.read().decode("utf-8", errors="replace").splitlines()
        except OSError:
            return []

    def last_words(self) -> str:
        """This round's last line in the log (what failed, often)."""
        lines = [ln.strip() for ln in self._log_lines() if ln.strip()]
        return f" (last: {lines[-1][:200]})" if lines else ""

    def lost(self) -> str:
        """Why the connection ended, for the error line."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        return (f"{self.name()} died ({_status(self.proc.poll())}){self.last_words()}; "
                f"see {self.log}")

    def failed(self, message: str) -> str:
        """An error the worker reported, for the error line."""
        return f"{self.name()}: {message} (log {self.log})"

    def end(self, grace: float = 10.0) -> None:
        """Wait for the job to end by itself (its connection is closed), then end its
        process group: SIGTERM, SIGKILL."""
        for sig, wait in ((None, grace), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if sig is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait)
                return


class Workers:
    """The parent's listener and the jobs it starts: started once, each serves every
    ``Jobs`` of ``prepare align`` (the training speakers, the monophones' subset, each
    split), one shard each. A context manager: on exit every job is ended and the key
    removed."""

    def __init__(self, launch: Launch) -> None:
        self.launch = launch
        self.command = shlex.split(launch.command)
        if not self.command:
            raise ConfigError("--job-cmd is empty")
        self.log_dir = launch.out / "log"
        self.key_file = launch.out / KEY_NAME
        self.round = 0                     # one per Jobs of the parent: its shards' key
        self.jobs: list[RemoteJob] = []    # started, in order of their numbers
        self._hellos: queue.Queue[tuple[Connection, Any]] = queue.Queue()
        self._closing = False
        self._old_term: Any = None
        self.terminated = False            # set by SIGTERM, even where its exception was lost

    # --- listening ---
    def __enter__(self) -> Workers:
        listen = self.launch.listen or default_host()
        host, port = parse_address(listen)
        key = os.urandom(32)
        self.launch.out.mkdir(parents=True, exist_ok=True)
        self.key_file.unlink(missing_ok=True)   # a new file, so 0600 holds
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(key)
        self._key = key
        try:
            self.listener = Listener((host, port), authkey=key)
        except OSError as exc:
            self.key_file.unlink(missing_ok=True)
            raise ConfigError(f"--listen {listen}: cannot listen there "
                              f"({exc.strerror or exc})") from None
        self.address = f"{host}:{self.listener.address[1]}"
        self._thread = threading.Thread(target=self._accept, name="align-accept", daemon=True)
        self._thread.start()
        if threading.current_thread() is threading.main_thread():
            self._old_term = signal.signal(signal.SIGTERM, self._on_sigterm)
        log.info("alignment jobs: started with %r, connecting to %s", self.launch.command,
                 self.address)
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if self._old_term is not None:   # a second SIGTERM during the clean-up ends us
            signal.signal(signal.SIGTERM, self._old_term)
        for job in self.jobs:
            if job.conn is not None:
                job.conn.close()
        for job in self.jobs:   # a connected job ends by itself once its connection closes
            job.end(grace=10.0 if job.conn is not None else 0.0)
        self._closing = True
        with contextlib.suppress(OSError, EOFError, AuthenticationError):
            Client(self.listener.address, authkey=self._key).close()   # wakes accept()
        self._thread.join(timeout=5)
        self.listener.close()
        self.key_file.unlink(missing_ok=True)
        if exc_type is None:
            self.check()

    def _accept(self) -> None:
        """Every authenticated connection's hello, queued (a thread: accept() blocks)."""
        while not self._closing:
            try:
                conn = self.listener.accept()
            except (AuthenticationError, EOFError, ConnectionError) as exc:
                log.warning("alignment jobs: a connection refused (%s)", exc)
                continue
            except OSError:
                return
            if self._closing:
                conn.close()
                return
            try:
                hello = conn.recv() if conn.poll(60) else None
            except (EOFError, OSError):
                hello = None
            if hello is None:
                conn.close()
            else:
                self._hellos.put((conn, hello))

    # --- SIGTERM ---
    def _on_sigterm(self, _signum: int, _frame: Any) -> None:
        """Raise where the parent is; remember it too, for code that catches every
        ``Exception`` (logging does, when the signal comes during a blocked write to a
        full stderr pipe) and would otherwise let the run go on to exit 0."""
        self.terminated = True
        self.check()

    def check(self) -> None:
        """Raise ``Terminated`` if SIGTERM came and its exception was swallowed."""
        if self.terminated:
            raise Terminated("stopped by SIGTERM; the alignment jobs were ended")

    # --- the jobs ---
    def start(self, n: int, what: str) -> tuple[int, list[RemoteJob]]:
        """``n`` jobs for one ``Jobs`` of the parent: those already running, and more
        started (and waited for) where ``n`` is more; the key of its shards."""
        if n > len(self.jobs):
            more = [self._launch(j, what) for j in range(len(self.jobs) + 1, n + 1)]
            self.jobs.extend(more)
            self._connect(more)
        self.round += 1
        return self.round, self.jobs[:n]

    def _launch(self, j: int, what: str) -> RemoteJob:
        argv = [*self.command, sys.executable, "-m", "asrtrain.cli.main", "prepare",
                "align-worker", "--connect", self.address, "--job", str(j), "--authkey-file",
                str(self.key_file.resolve())]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"align-worker.{j}.log"
        with open(path, "ab") as fh:
            fh.write(f"# {time.strftime('%Y-%m-%dT%H:%M:%S')} job {j}, started for {what}: "
                     f"{shlex.join(argv)}\n".encode())
            fh.flush()
            start = fh.tell()
            try:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=fh,
                                        stderr=subprocess.STDOUT, start_new_session=True)
            except OSError as exc:
                raise AsrtrainError(f"alignment job {j}: cannot start {self.command[0]!r} "
                                    f"({exc.strerror or exc}); see {path}") from None
        return RemoteJob(j, path, proc, self.address, start)

    def _connect(self, jobs: list[RemoteJob]) -> None:
        """Each job's hello, or an error as soon as one has exited or the timeout has
        passed."""
        waiting = {job.job: job for job in jobs}
        deadline = time.monotonic() + self.launch.timeout
        while waiting:
            try:
                conn, hello = self._hellos.get(timeout=0.2)
            except queue.Empty:
                conn, hello = None, None
            if conn is not None:
                kind, j, host, _pid = hello
                if kind != "hello" or j not in waiting:
                    conn.close()
                    continue
                job = waiting.pop(j)
                job.conn, job.host = _keepalive(conn), host
                continue
            for job in waiting.values():
                if job.proc.poll() is not None:
                    raise AsrtrainError(f"{job.name()} ended ({_status(job.proc.poll())}) "
                                        f"before connecting to {self.address}"
                                        f"{job.last_words()}; see {job.log}")
            if time.monotonic() > deadline:
                job = next(iter(waiting.values()))
                raise AsrtrainError(
                    f"{job.name()} did not connect to {self.address} within "
                    f"{self.launch.timeout:g} s (--connect-timeout; can that host reach this "
                    f"address? --listen){job.last_words()}; see {job.log}")
        log.info("alignment jobs: %d connected from %s", len(jobs),
                 ", ".join(sorted({job.host or "?" for job in jobs})))


def _keepalive(conn: Connection) -> Connection:
    """TCP keepalive probes after 60 s of silence, every 10 s, 6 unanswered: a host
    that vanishes (power, network) ends the connection in about 2 minutes, not hours.
    The kernel answers them, so a job busy for an hour is not taken for a lost one."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 6)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)
    finally:
        sock.close()   # the options stay on the connection's socket
    return conn


# --- the worker's side ---

class ParentWatch:
    """Ends the worker when the parent's side of the connection closes while it computes
    (a killed parent: otherwise it would learn only when it answers)."""

    def __init__(self, conn: Connection) -> None:
        self.sock = socket.socket(fileno=os.dup(conn.fileno()))
        self.busy = threading.Event()
        threading.Thread(target=self._watch, name="parent-watch", daemon=True).start()

    def _watch(self) -> None:
        while True:
            self.busy.wait()
            ready, _, _ = select.select([self.sock], [], [], 1.0)
            if ready and self.busy.is_set():
                try:
                    data = self.sock.recv(1, socket.MSG_PEEK)
                except OSError:
                    data = b""
                if not data:
                    log.error("align-worker: the parent closed the connection; ending")
                    os._exit(1)
                time.sleep(1.0)   # a message while busy is not the protocol: do not spin

    @contextlib.contextmanager
    def call(self) -> Iterator[None]:
        self.busy.set()
        try:
            yield
        finally:
            self.busy.clear()


def run_worker(connect: str, job: int, key_file: Path) -> None:
    """``prepare align-worker``: connect, say hello, answer until the parent closes."""
    import torch

    from asrtrain.align.shard import serve

    host, pid = socket.gethostname(), os.getpid()
    log.info(HELLO_LINE.format(job=job, host=host, pid=pid, address=connect))
    torch.set_num_threads(1)   # many small products: a second thread only waits (DESIGN.md)
    key = Path(key_file).read_bytes()
    try:
        conn = Client(parse_address(connect, "--connect"), authkey=key)
    except (OSError, AuthenticationError) as exc:
        raise AsrtrainError(f"job {job}: cannot connect to {connect} ({exc})") from None
    _keepalive(conn)
    conn.send(("hello", job, host, pid))
    serve(conn, {}, ParentWatch(conn).call, remote=True)
    log.info("align-worker: job %d done (the parent closed the connection)", job)
