"""``prepare align --job-cmd``: jobs started by a job command that cannot start, exit,
never connect or die are one error line naming the job, its host and its log, with no
alignment output left looking complete; SIGTERM or Ctrl-C of the parent ends the jobs.
On two network-namespace hosts (slow) the jobs on the other host give what one
process gives."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "distributed"))

from ladder_runs import LADDER, align_args, assert_same, cli  # noqa: E402

#: A ladder long enough that a job is still working when the test acts on it.
LONG = [*LADDER, "--mono-iters", "400"]


def _fails(one_error, tiny_corpus: Path, tiny_mfcc: Path, out: Path, *extra: str) -> str:
    proc = cli(*align_args(tiny_corpus, tiny_mfcc, out, 2), *extra, timeout=300)
    line = one_error(proc.stderr, 1, proc.returncode, "alignment job 1")
    _nothing_complete(out)
    return line


def _nothing_complete(out: Path) -> None:
    assert not (out / "report.json").exists()
    assert not (out / "train" / "ali.scp").exists()
    assert not (out / ".align-worker.key").exists()


def _gone(pid: int, within: float = 30.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_job_that_exits_at_once_is_one_line_naming_it_and_its_log(tiny_corpus, tiny_mfcc,
                                                                     tmp_path, one_error) -> None:
    out = tmp_path / "ali"
    line = _fails(one_error, tiny_corpus, tiny_mfcc, out, "--job-cmd",
                  "sh -c 'echo srun: error: invalid partition >&2; exit 3' sh")
    assert "ended (exit status 3) before connecting to" in line, line
    assert str(out / "log" / "align-worker.1.log") in line, line
    assert "srun: error: invalid partition" in line, line   # what the job said last


def test_a_job_command_that_cannot_start(tiny_corpus, tiny_mfcc, tmp_path, one_error) -> None:
    line = _fails(one_error, tiny_corpus, tiny_mfcc, tmp_path / "ali", "--job-cmd", "no-such-launcher-x")
    assert "cannot start 'no-such-launcher-x'" in line and "align-worker.1.log" in line, line


def test_a_job_that_never_connects_is_ended(tiny_corpus, tiny_mfcc, tmp_path, one_error) -> None:
    pid_file = tmp_path / "pid"
    line = _fails(one_error, tiny_corpus, tiny_mfcc, tmp_path / "ali", "--connect-timeout", "2",
                  "--job-cmd", f"sh -c 'echo $$ > {pid_file}; exec sleep 300' sh")
    assert "did not connect to" in line and "within 2 s" in line, line
    assert _gone(int(pid_file.read_text())), "the job that never connected still runs"


def _start(tiny_corpus: Path, tiny_mfcc: Path, out: Path, *, mono_iters: int = 400,
           stderr: Any = None) -> tuple[subprocess.Popen[str], dict]:
    """``prepare align`` with two ``env`` jobs, once both have read their features: the
    parent and the jobs' pids by job. Its stderr goes to ``OUT.stderr`` unless given (an
    unread pipe fills and blocks the parent's logging)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if stderr is None:
        stderr = open(out.parent / f"{out.name}.stderr", "w")  # noqa: SIM115 - the child keeps it
    parent = subprocess.Popen([str(Path(sys.executable).parent / "asrtrain"),
                               *map(str, align_args(tiny_corpus, tiny_mfcc, out, 2)), *LADDER,
                               "--mono-iters", str(mono_iters),
                               "--job-cmd", "env", "--listen", "127.0.0.1"],
                              stdout=subprocess.DEVNULL, stderr=stderr, text=True, env=env)
    pids: dict[int, int] = {}
    end = time.monotonic() + 240
    while len(pids) < 2:
        assert parent.poll() is None and time.monotonic() < end, _stderr(parent, out)
        for j in (1, 2):
            log = out / "log" / f"align-worker.{j}.log"
            text = log.read_text() if log.exists() else ""
            hello = re.search(r"align-worker: job \d+ on \S+ pid (\d+)", text)
            if hello and "utterances of" in text:
                pids[j] = int(hello.group(1))
        time.sleep(0.1)
    return parent, pids


def _stderr(parent: subprocess.Popen[str], out: Path) -> str:
    """The parent's stderr so far (its file, or its pipe once it has ended)."""
    path = out.parent / f"{out.name}.stderr"
    if path.exists():
        return path.read_text()
    return parent.communicate(timeout=120)[1] if parent.stderr is not None else ""


@pytest.mark.slow  # a run killed half-way (~15 s)
def test_a_job_that_dies_is_one_line_naming_it(tiny_corpus, tiny_mfcc, tmp_path, one_error) -> None:
    out = tmp_path / "ali"
    parent, pids = _start(tiny_corpus, tiny_mfcc, out)
    os.kill(pids[2], signal.SIGKILL)
    parent.wait(timeout=120)
    err = _stderr(parent, out)
    line = one_error(err, 1, parent.returncode, "alignment job 2 on ", "died (killed by SIGKILL)",
                      str(out / "log" / "align-worker.2.log"))
    assert "died" in line
    _nothing_complete(out)
    assert _gone(pids[1]), "the other job still runs"


@pytest.mark.parametrize("sig,status,says", [
    (signal.SIGTERM, 143, "stopped by SIGTERM"),
    pytest.param(signal.SIGINT, 130, "interrupted", marks=pytest.mark.slow)])
def test_sigterm_or_ctrl_c_of_the_parent_ends_the_jobs(tiny_corpus, tiny_mfcc, tmp_path, sig,
                                                       status, says, one_error) -> None:
    out = tmp_path / "ali"
    parent, pids = _start(tiny_corpus, tiny_mfcc, out)
    parent.send_signal(sig)
    parent.wait(timeout=120)
    one_error(_stderr(parent, out), status, parent.returncode, says)
    assert all(_gone(pid) for pid in pids.values()), "a job outlived its parent"
    _nothing_complete(out)


def test_sigterm_while_the_parent_is_blocked_writing_its_log_is_not_lost(
        tiny_corpus, tiny_mfcc, tmp_path, one_error) -> None:
    """SIGTERM that arrives inside a blocked write to a full stderr pipe raises inside
    logging, which swallows every ``Exception``: the run must still stop with 143 (CI saw
    it go on to exit 0)."""
    out = tmp_path / "ali"
    parent, pids = _start(tiny_corpus, tiny_mfcc, out, mono_iters=2000, stderr=subprocess.PIPE)
    main_log = out / "log"
    sizes: list[int] = []
    end = time.monotonic() + 300
    while len(sizes) < 10 or sizes[-1] != sizes[-10] or sizes[-1] < 70_000:  # 1 s unchanged
        assert parent.poll() is None and time.monotonic() < end, "the parent never blocked"
        sizes.append(sum(p.stat().st_size for p in main_log.glob("prepare-align.*.log")))
        time.sleep(0.1)
    parent.send_signal(signal.SIGTERM)
    _, err = parent.communicate(timeout=120)
    one_error(err.splitlines()[-1], 143, parent.returncode, "stopped by SIGTERM")
    assert all(_gone(pid) for pid in pids.values()), "a job outlived its parent"
    _nothing_complete(out)


@pytest.mark.slow  # two network-namespace hosts, a whole ladder (~40 s)
def test_jobs_on_another_host_give_what_one_process_gives(one_process, tiny_corpus, tiny_mfcc,
                                                         tmp_path) -> None:
    """The parent on host0 listens on its name's address (the default); both jobs run on
    host1, started by ``ip netns exec`` as a scheduler would start them there."""
    from netns import Hosts, unavailable

    why = unavailable()
    if why is not None:
        pytest.skip(f"cannot make hosts: {why}")
    out = tmp_path / "ali"
    exe = str(Path(sys.executable).parent / "asrtrain")
    with Hosts(2) as hosts:
        job_cmd = shlex.join(["env", "HOSTNAME_=host1", f"HOSTS_FILE={hosts.hosts_file}",
                              *hosts.command(1, [])])
        proc = hosts.run(0, [exe, *align_args(tiny_corpus, tiny_mfcc, out, 2), "--job-cmd",
                             job_cmd], timeout=600, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "connecting to host0:" in (out / "log" / "align-worker.1.log").read_text()
    for j in (1, 2):
        assert f"align-worker: job {j} on host1 " in (out / "log" / f"align-worker.{j}.log").read_text()
    assert "2 connected from host1" in proc.stdout
    assert_same(one_process, out)
