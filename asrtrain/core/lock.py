"""One writer per output: an advisory lock beside every output asrtrain writes.

Two runs on one output (a requeued job starting while the old one still runs, a
double submission) used to both run to the end, each overwriting the other's files.
Every command that writes an output takes its lock first
(:func:`asrtrain.core.runlog.command_run` does, so one place decides), and a second
writer is refused with one line naming the holder. The lock is the file
``.<name>.lock`` beside the output (beside, not inside: outputs written whole are
renamed into place). It holds a JSON record of the holder (host, pid, start,
command) and is held with ``flock``:

* ``flock`` answers whether the holder is alive wherever it works (local disks, NFS
  with its lock manager); the record names the holder in the refusal;
* a lock whose holder is gone is taken over, with a note in the run's log: on the same
  host when its pid is gone (or is another process now, or the host rebooted); for a
  holder on another host (a shared filesystem where ``flock`` is local to each host)
  when its heartbeat (the file's mtime, touched every ``HEARTBEAT_S``) is older than
  ``STALE_S``;
* where ``flock`` is not supported at all, the record alone decides; two runs that
  start within the same moment on a lock already stale can then both take it.

The learners of a distributed job share its lock: only the process that runs the
command (``--nproc``'s launcher, rank 0 under a launcher) takes it. Readers take no
lock: they read files written whole and renamed (:mod:`asrtrain.core.atomic`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import shlex
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from asrtrain.core.atomic import temp_name
from asrtrain.core.errors import AsrtrainError

log = logging.getLogger("asrtrain.lock")

#: How often a holder touches its lock file (its heartbeat for other hosts).
HEARTBEAT_S = 30.0
#: A holder on another host whose heartbeat is older than this is taken as gone.
STALE_S = 600.0
_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


class OutputBusy(AsrtrainError):
    """Another run holds the lock of this output."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: enough to name it, and to tell whether it is still alive."""

    host: str
    pid: int
    started: str
    command: str
    boot_id: str | None = None
    pid_start: int | None = None  # the kernel's start time of the pid (a reused pid is another process)

    @classmethod
    def this_process(cls, command: str | None = None) -> Holder:
        return cls(socket.gethostname(), os.getpid(), dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                   command or this_command(), boot_id(), process_start(os.getpid()))

    @classmethod
    def parse(cls, data: bytes) -> Holder | None:
        try:
            record = json.loads(data.decode("utf-8"))
            return cls(**{k: record.get(k) for k in ("host", "pid", "started", "command", "boot_id", "pid_start")})
        except (ValueError, TypeError, AttributeError):
            return None

    def to_bytes(self) -> bytes:
        return (json.dumps(asdict(self), sort_keys=True) + "\n").encode("utf-8")

    def describe(self) -> str:
        command = self.command if len(self.command) <= 200 else self.command[:197] + "..."
        return f"host {self.host}, pid {self.pid}, since {self.started}: {command}"


def this_command() -> str:
    """The command line of this process, as the user typed it (``asrtrain train …``)."""
    argv = list(sys.argv) or ["python"]
    if Path(argv[0]).name == "asrtrain":
        argv[0] = "asrtrain"
    return shlex.join(argv)


def boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (``/proc/<pid>/stat``), None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def lock_path(output: str | os.PathLike[str]) -> Path:
    """The lock file of ``output``: ``.<name>.lock`` beside it."""
    out = Path(os.path.abspath(output))
    return out.parent / f".{out.name or 'root'}.lock"


def gone(holder: Holder | None, age_s: float) -> str | None:
    """Why the holder of a lock whose flock nobody holds (or where flock does not work) is gone;
    None if it may still be running. ``age_s``: seconds since the lock file's last heartbeat."""
    if holder is None:
        # a record being written, or left unreadable by a kill while it was written
        return f"no readable holder record for {age_s:.0f} s" if age_s > HEARTBEAT_S else None
    if holder.host != socket.gethostname():
        if age_s > STALE_S:
            return f"no heartbeat from host {holder.host} for {age_s:.0f} s"
        return None
    if holder.boot_id and boot_id() and holder.boot_id != boot_id():
        return f"host {holder.host} restarted since"
    if not pid_alive(holder.pid):
        return f"pid {holder.pid} is gone"
    now = process_start(holder.pid)
    if holder.pid_start is not None and now is not None and now != holder.pid_start:
        return f"pid {holder.pid} is another process now"
    return None


class OutputLock:
    """The lock of one output, held by this process between :meth:`acquire` and :meth:`release`."""

    def __init__(self, output: str | os.PathLike[str], command: str | None = None) -> None:
        self.output = Path(output)
        self.path = lock_path(output)
        self.holder = Holder.this_process(command)
        self.fd: int | None = None
        self.flocked: bool | None = None  # None: the filesystem has no flock
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def acquire(self) -> str | None:
        """Take the lock; returns a note when it took over from a run that is gone, else None.

        Raises :class:`OutputBusy` naming the holder when another run holds it.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(20):  # the file may be released and removed between our open and our flock
            if self._create():
                self._start_heartbeat()
                return None
            try:
                fd = os.open(self.path, os.O_RDWR)
            except FileNotFoundError:
                continue
            note = self._take(fd)
            if note is not None:
                self._start_heartbeat()
                return note
        raise OutputBusy(f"its lock {self.path} keeps changing hands; try again", self.output)

    def _create(self) -> bool:
        """Make the lock file whole (record written, flock held) under a private name, then link it into
        place: no one ever sees it empty. False when it exists already."""
        tmp = temp_name(self.path)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, self.holder.to_bytes())
            os.fsync(fd)
            flocked = _flock(fd)
            os.link(tmp, self.path)
        except FileExistsError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        self.fd, self.flocked = fd, flocked
        return True

    def _take(self, fd: int) -> str | None:
        """An existing lock file: refuse (its holder lives), take it over (gone), or None (it vanished)."""
        try:
            flocked = _flock(fd)
            if flocked is False:
                raise self._busy(_read(fd), None)
            if not _same_file(fd, self.path):
                os.close(fd)
                return None
            holder = _read(fd)
            age = max(0.0, time.time() - os.fstat(fd).st_mtime)
            why = gone(holder, age)
            if why is None:
                raise self._busy(holder, age)
            _rewrite(fd, self.holder.to_bytes())
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        self.fd, self.flocked = fd, flocked
        return (f"{self.output}: took over the lock of a run that is gone ({why}): "
                f"{holder.describe() if holder else 'holder unknown'}")

    def _busy(self, holder: Holder | None, age: float | None) -> OutputBusy:
        who = holder.describe() if holder is not None else "holder not known yet"
        beat = ""
        if holder is not None and age is not None and holder.host != socket.gethostname():
            beat = f"; its heartbeat is {age:.0f} s old, a lock without one for {STALE_S:.0f} s is taken over"
        return OutputBusy(f"in use by another run ({who}){beat}; wait for it to end or stop it "
                          f"(lock file {self.path})", self.output)

    def _start_heartbeat(self) -> None:
        # the thread is born with every signal blocked: between its start and its own
        # pthread_sigmask a Ctrl-C could land on it (seen under load: `score` hung on a FIFO)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        try:
            self._beat = threading.Thread(target=self._heartbeat, name=f"lock {self.output.name}", daemon=True)
            self._beat.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _heartbeat(self) -> None:
        # signals are the main thread's: one delivered to this thread would set Python's flag
        # without interrupting the main thread's blocking read, so Ctrl-C there would hang
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
        while not self._stop.wait(HEARTBEAT_S):
            try:
                os.utime(self.path)
            except OSError as exc:
                log.warning("%s: cannot touch the lock file %s (%s)", self.output, self.path, exc.strerror)

    def release(self) -> None:
        """Give the lock up: the file goes (while still held), then the descriptor."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        fd, self.fd = self.fd, None
        if fd is None:
            return
        try:
            if _same_file(fd, self.path) and _read(fd) == self.holder:
                os.unlink(self.path)
            else:
                log.warning("%s: its lock was taken over by another run while this one held it", self.output)
        finally:
            os.close(fd)


def _flock(fd: int) -> bool | None:
    """True: locked; False: another process holds it; None: this filesystem has no flock."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno in _UNSUPPORTED:
            return None
        raise
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _read(fd: int) -> Holder | None:
    return Holder.parse(os.pread(fd, 65536, 0))


def _rewrite(fd: int, data: bytes) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
    os.fsync(fd)


@dataclass
class Held:
    """A lock this process holds (once however often it is entered); the takeover note is told once."""

    lock: OutputLock | None
    note: str | None = None
    count: int = 1

    def take_note(self) -> str | None:
        note, self.note = self.note, None
        return note


_HELD: dict[Path, Held] = {}
_GUARD = threading.Lock()


@contextlib.contextmanager
def hold(output: str | os.PathLike[str], command: str | None = None) -> Iterator[Held]:
    """Hold the lock of ``output`` for the block (re-entrant in one process); :class:`OutputBusy` if
    another run holds it. Where no lock file can be made (a read-only parent), the run goes on unlocked
    with a warning."""
    key = lock_path(output)
    with _GUARD:
        held = _HELD.get(key)
        if held is not None:
            held.count += 1
        else:
            held = _HELD[key] = _acquire(output, command)
    try:
        yield held
    finally:
        with _GUARD:
            held.count -= 1
            if held.count == 0:
                del _HELD[key]
                if held.lock is not None:
                    held.lock.release()


def _acquire(output: str | os.PathLike[str], command: str | None) -> Held:
    lock = OutputLock(output, command)
    try:
        note = lock.acquire()
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
        log.warning("%s: no lock (%s: %s): a second run on this output would not be refused",
                    output, lock.path, exc.strerror)
        return Held(None)
    return Held(lock, note)


def holder_of(output: str | os.PathLike[str]) -> Holder | None:
    """The record of the lock of ``output``, None if it has none (for messages and tests)."""
    try:
        return Holder.parse(lock_path(output).read_bytes())
    except FileNotFoundError:
        return None
