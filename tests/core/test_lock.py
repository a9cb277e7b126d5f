"""Two processes on one output: the second writer is refused naming the holder; a killed holder's lock is
taken over with a note; readers keep reading whole files while a writer replaces them.

The holder is a real second process: ``command_run`` (what every command goes through) in a spawned
child that waits until the test lets it go or kills it.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrtrain.core import lock as lockmod
from asrtrain.core.lock import Holder, OutputBusy, OutputLock, hold, holder_of, lock_path

ASRTRAIN = Path(sys.executable).parent / "asrtrain"


@pytest.fixture(scope="module")
def learnable_archives(tmp_path_factory) -> tuple[Path, Path]:
    """tests/train's small learnable archive (its writer, loaded from there)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_conftest", Path(__file__).parents[1] / "train" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    root = tmp_path_factory.mktemp("archives")
    return mod.write_learnable_archive(root / "train.h5", 60, seed=0), None


def _hold(out: str, argv: list[str], conn) -> None:
    """A run that holds ``out``: ``command_run`` as a command does, until the test says or kills it."""
    from asrtrain.core.runlog import command_run

    sys.argv = argv
    with command_run("train", out):
        conn.send("held")
        conn.recv()


class HolderProcess:
    def __init__(self, out: Path, argv: list[str] | None = None) -> None:
        ctx = mp.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.argv = argv or ["asrtrain", "train", "a.h5", str(out)]
        self.proc = ctx.Process(target=_hold, args=(str(out), self.argv, child), daemon=True)
        self.proc.start()
        assert self.conn.poll(60) and self.conn.recv() == "held"

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.join()

    def stop(self) -> None:
        if self.proc.is_alive():
            self.conn.send("go")
            self.proc.join(30)


@pytest.fixture
def holder(tmp_path):
    made: list[HolderProcess] = []

    def start(out: Path, argv: list[str] | None = None) -> HolderProcess:
        made.append(HolderProcess(out, argv))
        return made[-1]

    yield start
    for h in made:
        h.stop()


def _train_args(archives: tuple[Path, Path], exp: Path) -> list[str]:
    return ["train", str(archives[0]), str(exp), "--epochs", "1", "--batch", "32", "--threads", "1",
            "--hidden", "8", "--layers", "1", "--proj", "0"]


def test_a_second_train_is_refused_naming_the_holder(learnable_archives, tmp_path, holder):
    exp = tmp_path / "exp"
    first = holder(exp, ["asrtrain", "train", str(learnable_archives[0]), str(exp)])
    before = sorted(p.relative_to(exp) for p in exp.rglob("*"))
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    proc = subprocess.run([str(ASRTRAIN), *_train_args(learnable_archives, exp)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert len(errors) == 1, proc.stderr
    record = holder_of(exp)
    assert record is not None and record.pid == first.proc.pid
    assert errors[0] == (f"Error: {exp}: in use by another run (host {socket.gethostname()}, pid {first.proc.pid}, "
                         f"since {record.started}: asrtrain train {learnable_archives[0]} {exp}); wait for it to "
                         f"end or stop it (lock file {lock_path(exp)})")
    assert sorted(p.relative_to(exp) for p in exp.rglob("*")) == before  # the refused run wrote nothing
    first.stop()
    assert not lock_path(exp).exists()  # released: the lock file goes with its holder


def test_a_killed_holders_lock_is_taken_over_with_a_note(learnable_archives, tmp_path, holder):
    exp = tmp_path / "exp"
    first = holder(exp)
    pid = first.proc.pid
    first.kill()
    assert lock_path(exp).exists()  # a SIGKILL leaves the file behind
    res = CliRunner().invoke(_cli(), _train_args(learnable_archives, exp))
    assert res.exit_code == 0, res.output
    logs = "".join(p.read_text() for p in (exp / "log").glob("train.*.log"))
    assert f"took over the lock of a run that is gone (pid {pid} is gone): host {socket.gethostname()}, pid {pid}" \
        in logs
    assert (exp / "final.pt").is_file() and not lock_path(exp).exists()


def _cli():
    from asrtrain.cli.main import cli

    return cli


def _fake_lock(out: Path, holder: Holder, age_s: float) -> Path:
    path = lock_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(holder.to_bytes())
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def _other_host(command: str = "asrtrain train x exp") -> Holder:
    return Holder("node-17", 4242, "2025-01-01T00:00:00+00:00", command, "another-boot", 1)


def test_a_holder_on_another_host_counts_while_its_heartbeat_is_fresh(tmp_path):
    out = tmp_path / "exp"
    _fake_lock(out, _other_host(), age_s=5)
    with pytest.raises(OutputBusy) as err:
        OutputLock(out).acquire()
    assert "in use by another run (host node-17, pid 4242, since 2025-01-01T00:00:00+00:00: asrtrain train x exp)" \
        in str(err.value)
    assert re.search(rf"heartbeat is \d+ s old, a lock without one for {lockmod.STALE_S:.0f} s is taken over",
                     str(err.value))


def test_a_holder_on_another_host_with_a_stale_heartbeat_is_taken_over(tmp_path):
    out = tmp_path / "exp"
    _fake_lock(out, _other_host(), age_s=lockmod.STALE_S + 60)
    lock = OutputLock(out)
    note = lock.acquire()
    try:
        assert note is not None and "no heartbeat from host node-17 for" in note
        assert holder_of(out) == lock.holder
    finally:
        lock.release()


def test_a_reused_pid_or_a_reboot_is_not_the_holder(tmp_path):
    me = Holder.this_process()
    reused = Holder(me.host, os.getppid(), me.started, "asrtrain decode", me.boot_id, -1)  # alive, started otherwise
    rebooted = Holder(me.host, os.getppid(), me.started, "asrtrain decode", "an-earlier-boot", None)
    for record, why in ((reused, f"pid {os.getppid()} is another process now"), (rebooted, "restarted since")):
        _fake_lock(tmp_path / "out", record, age_s=0)
        lock = OutputLock(tmp_path / "out")
        note = lock.acquire()
        assert note is not None and why in note
        lock.release()


def test_an_unreadable_record_is_someone_writing_it_until_it_is_old(tmp_path):
    path = lock_path(tmp_path / "out")
    path.write_bytes(b'{"host": "no')
    with pytest.raises(OutputBusy, match="holder not known yet"):
        OutputLock(tmp_path / "out").acquire()
    os.utime(path, (time.time() - 2 * lockmod.HEARTBEAT_S,) * 2)
    lock = OutputLock(tmp_path / "out")
    assert "no readable holder record" in (lock.acquire() or "")
    lock.release()


def test_where_flock_does_not_work_the_record_decides(tmp_path, holder, monkeypatch):
    """NFS mounted with local locks, or without any: a live holder on this host is still refused."""
    out = tmp_path / "exp"
    first = holder(out)
    monkeypatch.setattr(lockmod, "_flock", lambda fd: None)
    with pytest.raises(OutputBusy, match=f"pid {first.proc.pid}"):
        OutputLock(out).acquire()
    first.kill()
    lock = OutputLock(out)
    assert f"pid {first.proc.pid} is gone" in (lock.acquire() or "")
    lock.release()


def test_one_process_holds_once_however_often_it_enters(tmp_path):
    out = tmp_path / "exp"
    with hold(out) as outer, hold(out) as inner:
        assert inner is outer and outer.count == 2
        with pytest.raises(OutputBusy):  # another open of the file: another holder
            OutputLock(out).acquire()
    assert not lock_path(out).exists()


def test_the_lock_file_says_who_holds_it(tmp_path):
    with hold(tmp_path / "exp", "asrtrain prepare lang d t a exp"):
        record = json.loads(lock_path(tmp_path / "exp").read_text())
    assert record["host"] == socket.gethostname() and record["pid"] == os.getpid()
    assert record["command"] == "asrtrain prepare lang d t a exp" and record["started"]


def test_outputs_written_whole_are_locked_until_renamed(tmp_path, holder):
    """prepare subset/perturb/synth build OUT under a temporary name: the lock is OUT's, not the temporary's."""
    from asrtrain.data.dir_view import DataDir
    from asrtrain.data.subset import write_subset

    out = tmp_path / "data" / "dev"
    first = holder(out)
    src = DataDir(tmp_path, {"u1": "s1"}, {"u1": "/a.wav"}, None)
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(OutputBusy, match=f"pid {first.proc.pid}"):
        write_subset(src, out, {"u1"})
    assert sorted(tmp_path.rglob("*")) == before  # no temporary directory either


def test_readers_read_whole_models_while_a_writer_replaces_them(tmp_path):
    """``decode`` reading ``final.pt`` while ``train`` writes the next: every read is a complete file."""
    from asrtrain.model.blstm import BLSTM
    from asrtrain.model.config import ModelConfig
    from asrtrain.model.io import load_final, save_final

    model = BLSTM(ModelConfig(input_dim=4, hidden=8, layers=1, proj=0, num_pdfs=3))
    path = tmp_path / "final.pt"
    save_final(path, model, [1, 1, 1], [], {"n": 0})
    stop = threading.Event()

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            save_final(path, model, [1, 2, 3], [], {"n": n})

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        seen = {load_final(path).meta["n"] for _ in range(60)}
    finally:
        stop.set()
        thread.join()
    assert seen and all(isinstance(n, int) for n in seen)
    assert not [p for p in tmp_path.iterdir() if p.name != "final.pt"]  # no temporaries left
