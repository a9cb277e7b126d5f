"""A cluster on one machine: hosts as network namespaces, with their own names, /dev/shm and links.

Each host is a network namespace (``ip netns``) with one veth link to a bridge that
carries only the hosts' private addresses (10.213.N.i/24: the bridge itself has no
address, so nothing reaches or leaves the machine). A command runs on a host through
``ip netns exec`` and ``unshare --uts --mount``: its own hostname, its own
``/dev/shm`` (a fresh tmpfs) and an ``/etc/hosts`` that names every host, as a
cluster's DNS would. ``shape`` limits each host's outgoing link with ``tc tbf``
(this kernel has no ``netem``: bandwidth can be shaped, latency cannot be added);
``cut`` takes a host's link down. Everything made is removed on exit, also after a
failure, and at interpreter exit as a last resort.

Needs root, ``ip``, ``tc`` and ``unshare``: :func:`unavailable` says why not.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SETUP = ('hostname "$HOSTNAME_"; mount -t tmpfs -o size=512m tmpfs /dev/shm; '
         'mount --bind "$HOSTS_FILE" /etc/hosts; unset HOSTNAME_ HOSTS_FILE; exec "$@"')


def unavailable() -> str | None:
    """Why hosts cannot be made here (None when they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    missing = [tool for tool in ("ip", "tc", "unshare", "mount") if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)}"
    probe = f"atprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


class Hosts:
    """``n`` hosts named host0…host{n-1}; use as a context manager."""

    def __init__(self, n: int, tag: int | None = None) -> None:
        self.n = n
        self.tag = (os.getpid() if tag is None else tag) % 250 + 1
        self.prefix = f"at{self.tag}"
        self.bridge = f"{self.prefix}br"
        self.namespaces = [f"{self.prefix}h{i}" for i in range(n)]
        self._dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.hosts_file = self._dir / "hosts"
        self._procs: list[subprocess.Popen[Any]] = []
        self._made = False

    def name(self, i: int) -> str:
        return f"host{i}"

    def addr(self, i: int) -> str:
        return f"10.213.{self.tag}.{i + 1}"

    # ---------------------------------------------------------------- making and removing

    def __enter__(self) -> Hosts:
        atexit.register(self.close)
        self._made = True
        try:
            self._make()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _make(self) -> None:
        self.close_leftovers()
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("link", "set", self.bridge, "up")
        lines = ["127.0.0.1 localhost"]
        for i, ns in enumerate(self.namespaces):
            veth = f"{self.prefix}v{i}"
            _ip("netns", "add", ns)
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("link", "set", veth, "master", self.bridge, "up")
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            lines.append(f"{self.addr(i)} {self.name(i)}")
        self.hosts_file.write_text("\n".join(lines) + "\n")

    def close_leftovers(self) -> None:
        """Remove what an earlier run with the same tag left (a crashed test)."""
        for ns in self.namespaces:
            if Path(f"/run/netns/{ns}").exists():
                self._kill_in(ns)
                _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)

    def close(self) -> None:
        """Stop every process started on a host, remove the namespaces, links and bridge."""
        if not self._made:
            return
        self._made = False
        for proc in self._procs:
            if proc.poll() is None:
                with _quiet():
                    os.killpg(proc.pid, signal.SIGKILL)
                with _quiet():
                    proc.wait(timeout=10)
        for ns in self.namespaces:
            self._kill_in(ns)
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)
        shutil.rmtree(self._dir, ignore_errors=True)

    @staticmethod
    def _kill_in(ns: str) -> None:
        pids = _ip("netns", "pids", ns, check=False).stdout.split()
        for pid in pids:
            with _quiet():
                os.kill(int(pid), signal.SIGKILL)

    # ---------------------------------------------------------------- links

    def shape(self, mbit: float | None) -> None:
        """Limit every host's outgoing link to ``mbit`` (None: remove the limit)."""
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"],
                           capture_output=True)
            if mbit is not None:
                burst = max(32_000, int(mbit * 1e6 / 8 / 250))  # a 4 ms burst at least
                proc = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root",
                                       "tbf", "rate", f"{mbit}mbit", "burst", str(burst), "latency", "200ms"],
                                      capture_output=True, text=True)
                if proc.returncode:
                    raise RuntimeError(f"tc on {ns}: {proc.stderr.strip()}")

    def cut(self, i: int) -> None:
        """Take host ``i``'s link down: it can reach no other host, and none can reach it."""
        _ip("-n", self.namespaces[i], "link", "set", "eth0", "down")

    # ---------------------------------------------------------------- running

    def command(self, i: int, argv: Sequence[str]) -> list[str]:
        """``argv`` as host ``i`` runs it."""
        return ["ip", "netns", "exec", self.namespaces[i], "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c", SETUP, "sh", *map(str, argv)]

    def popen(self, i: int, argv: Sequence[str], env: dict[str, str] | None = None, **kwargs: Any
              ) -> subprocess.Popen[Any]:
        """Start ``argv`` on host ``i`` in a process group of its own (killed on close)."""
        env = dict(env if env is not None else os.environ, HOSTNAME_=self.name(i), HOSTS_FILE=str(self.hosts_file))
        proc = subprocess.Popen(self.command(i, argv), env=env, start_new_session=True, **kwargs)
        self._procs.append(proc)
        return proc

    def run(self, i: int, argv: Sequence[str], timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        proc = self.popen(i, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
        out, _ = proc.communicate(timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode, out, None)


class _quiet:
    """Ignore a process that is already gone."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, *_: object) -> bool:
        return exc_type is not None and issubclass(exc_type, (ProcessLookupError, subprocess.TimeoutExpired,
                                                              PermissionError))


def torchrun(hosts: Hosts, nproc: int, port: int, argv: Sequence[str], run_id: str = "hosts") -> list[str]:
    """The ``torchrun`` command every host runs: a c10d rendezvous on host 0's address."""
    import sys

    exe = str(Path(sys.executable).parent / "torchrun")
    return [exe, "--nnodes", str(hosts.n), "--nproc-per-node", str(nproc), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{hosts.addr(0)}:{port}", "--rdzv-id", run_id, "--max-restarts", "0",
            "--monitor-interval", "0.5", *map(str, argv)]
