"""The installed ``asrtrain`` command, as a user runs it (real subprocesses)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asrtrain import __version__

EXE = shutil.which("asrtrain", path=str(Path(sys.executable).parent)) or "asrtrain"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "120"}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=60, cwd=cwd, env=env)


def test_help_lists_the_pipeline_commands() -> None:
    res = run("--help")
    assert res.returncode == 0
    listed = res.stdout.split("Commands:", 1)[1].split()
    for name in ("prepare", "train", "decode", "score"):
        assert name in listed, f"{name} missing from asrtrain --help"


def test_prepare_lists_its_stages() -> None:
    res = run("prepare", "--help")
    assert res.returncode == 0
    listed = res.stdout.split("Commands:", 1)[1].split()
    for name in ("synth", "features", "archive", "lang"):
        assert name in listed


def test_version() -> None:
    res = run("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"asrtrain, version {__version__}"


def test_unknown_command_exits_2() -> None:
    res = run("nope")
    assert res.returncode == 2 and "No such command 'nope'" in res.stderr


def test_help_imports_no_heavy_modules() -> None:
    """--help must stay fast: no torch, h5py or kaldi imports behind the listing."""
    code = ("import sys; from click.testing import CliRunner; from asrtrain.cli.main import cli;"
            "CliRunner().invoke(cli, ['--help']); CliRunner().invoke(cli, ['prepare', '--help']);"
            "import json; print(json.dumps(sorted(m for m in sys.modules"
            " if m.split('.')[0] in ('torch', 'h5py', 'numpy', 'kaldiio', 'kaldifst', 'matplotlib'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize("command", ["train", "decode", "score", "info"])
def test_every_command_has_help(command: str) -> None:
    res = run(command, "--help")
    assert res.returncode == 0, res.stderr
    assert "Usage: asrtrain" in res.stdout


def _as_from_a_terminal() -> None:
    """The child's SIGINT as a user's terminal gives it: default disposition, not blocked.

    A runner started in the background by a non-interactive shell ignores SIGINT, and one
    started from a thread may block it (CI's did: the test hung); children inherit both.
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _signal_masks(pid: int) -> str:
    """Each thread's blocked/ignored/caught masks, for a failure message that says why."""
    import pathlib

    rows = []
    for task in sorted(pathlib.Path(f"/proc/{pid}/task").glob("*")):
        try:
            status = (task / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        rows.append(f"{fields.get('Name', '?').strip()} blk={fields.get('SigBlk', '?').strip()} "
                    f"ign={fields.get('SigIgn', '?').strip()} cgt={fields.get('SigCgt', '?').strip()}")
    return "; ".join(rows) or "process gone"


def _wait_until_reading(proc, fifo, deadline: float) -> None:
    """Wait until the child's main thread is blocked in a syscall on FIFO's descriptor.

    A Ctrl-C that lands after ``open`` returns but before ``read`` blocks only sets
    Python's pending-signal flag (checked between bytecodes, not before a C call), and the
    read then waits for data that never comes: a race in how the test presses Ctrl-C, not in
    the command. A user's Ctrl-C comes while the command waits, which this reproduces.
    """
    import os
    import time

    def fifo_fds() -> set[int]:
        fds = set()
        for link in os.scandir(f"/proc/{proc.pid}/fd"):
            try:
                if os.readlink(link.path) == str(fifo):
                    fds.add(int(link.name))
            except OSError:
                continue
        return fds

    while time.monotonic() < deadline and proc.poll() is None:
        try:
            fields = open(f"/proc/{proc.pid}/syscall").read().split()
        except OSError:
            fields = []
        if len(fields) > 1 and fields[0] not in ("running", "-1") and int(fields[1], 16) in fifo_fds():
            return
        time.sleep(0.05)
    pytest.fail(f"asrtrain never blocked reading {fifo} (exit {proc.poll()})")


def test_ctrl_c_is_one_line_and_exit_130(tmp_path, one_error) -> None:
    """Ctrl-C while a command waits on its input (a FIFO no one writes): no traceback."""
    import errno
    import os
    import signal
    import subprocess
    import sys
    import time

    ref, hyp = tmp_path / "ref.txt", tmp_path / "hyp.txt"
    ref.write_text("u1 HELLO WORLD\n")
    os.mkfifo(hyp)
    exe = os.path.join(os.path.dirname(sys.executable), "asrtrain")
    proc = subprocess.Popen([exe, "score", str(ref), str(hyp), str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_from_a_terminal)
    deadline = time.monotonic() + 60
    while True:  # a FIFO opens for writing without blocking only once a reader has it open
        try:
            fd = os.open(hyp, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            assert exc.errno == errno.ENXIO and time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
    try:
        _wait_until_reading(proc, hyp, deadline)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            masks = _signal_masks(proc.pid)
            proc.kill()
            proc.communicate()
            pytest.fail(f"asrtrain did not end 60 s after SIGINT; its signal masks: {masks}")
    finally:
        os.close(fd)
    one_error(err, 130, proc.returncode, "interrupted (Ctrl-C)")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("*.sys"))


QUICK_EXIT = """
import atexit, sys, threading, time
from pathlib import Path
from asrtrain.cli.main import quick_exit
out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
def late() -> None:
    time.sleep(0.3)
    (out / "thread").write_text("joined")
threading.Thread(target=late).start()
log = open(out / "unclosed", "w")      # buffered, never closed: the teardown would flush it
log.write("x" * 5000)
sys.stdout.write("y" * 200_000)
quick_exit(3)
"""


def test_quick_exit_keeps_what_a_normal_exit_does(tmp_path) -> None:
    """The console script skips the interpreter's teardown (torch's costs ~0.65 s of CPU a
    command) but not what the program's state needs: its status, stdout in full, atexit
    handlers, non-daemon threads joined, a file left open flushed."""
    res = subprocess.run([sys.executable, "-c", QUICK_EXIT, str(tmp_path)], capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 3, res.stderr
    assert len(res.stdout) == 200_000
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "joined"
    assert (tmp_path / "unclosed").read_text() == "x" * 5000


def test_the_console_script_exits_with_the_commands_status_and_its_log(tmp_path) -> None:
    ref, hyp = tmp_path / "ref", tmp_path / "hyp"
    ref.write_text("u1 a b c\nu2 d e\n")
    hyp.write_text("u1 a x c\nu2 d e\n")
    log = tmp_path / "run.log"
    res = run("--log-file", str(log), "score", str(ref), str(hyp), str(tmp_path / "score"))
    assert res.returncode == 0, res.stderr
    assert "%WER 20.00 [ 1 / 5" in res.stdout + res.stderr
    assert "%WER 20.00" in log.read_text()
    missing = run("score", str(tmp_path / "nope"), str(hyp), str(tmp_path / "s2"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr   # Click's usage error
