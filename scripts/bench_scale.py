#!/usr/bin/env python3
"""Every recipe stage's wall time, CPU time and peak memory as the corpus grows (issue 38).

For each size, ``recipes/synth/run.sh`` on the embedded synthesizer (24 speakers an hour, an
eighth of them dev and an eighth test) is run one stage at a time, exactly as a user runs it
(``--stage N --stop-stage N``), with the learned alignment ladder, every size the sizes rule's
(``asrtrain prepare sizes``), the papers' three input streams (the rule's from 20 h, so that
i-vectors and fMLLR are measured) and one training epoch; decoding is of the test split. Each
stage is one subprocess tree, measured as:

- wall: ``time.perf_counter`` around it;
- CPU: user + sys of every process of the tree (``getrusage(RUSAGE_CHILDREN)`` before and
  after; this process is a child subreaper, so jobs orphaned by their parent are reaped here
  and counted too);
- memory: the largest single process (``ru_maxrss`` of each process reaped, exact) and the
  tree's sum of PSS (``/proc/PID/smaps_rollup``, every 0.5 s: shared pages counted once,
  short peaks can be missed); the table takes the larger.

One JSON a (size, stage) under ``--out``: a stage with its JSON is skipped, so a killed run
resumes where it stopped (the stage cut short is redone from its start). The table (also
``OUT/scale.md``) fits each stage's growth and extrapolates it to 960 h and 2,000 h on the
cluster of ``bench_scale_table.py``; ``--report`` prints it from the JSONs alone.

    nice -n 10 .venv/bin/python scripts/bench_scale.py --hours 0.25 1 --out ../bench_scale
    .venv/bin/python scripts/bench_scale.py --out ../bench_scale --report
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench_scale_table import load, markdown, summarize

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "recipes" / "synth" / "run.sh"
#: hybrid.sh's stages one a number, so that align and adapt are apart (synth joins them).
RECIPE_STAGES = "data features align adapt lang archive train decode score export"
#: Sizes left to the rule (asrtrain/data/sizes.py); epochs and streams are set below.
AUTO_SIZES = ("ali_mono_gauss", "ali_leaves", "ali_gauss", "num_pdfs", "hidden", "layers",
              "proj", "batch", "base_batch", "lr", "ubm_components", "fmllr_gmm_components",
              "ivector_dim", "lm_order")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass(frozen=True)
class Stage:
    """A measured stage: the recipe's stage number, its options, its environment."""

    name: str
    number: int
    options: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


STAGES = (
    Stage("corpus", 0), Stage("features", 1), Stage("align", 2),
    # stage adapt runs what --streams asks: one stream at a time measures each apart
    Stage("ivectors", 3, ("--streams", "ivector")), Stage("fmllr", 3, ("--streams", "fmllr")),
    Stage("lang", 4), Stage("archive", 5), Stage("train", 6),
    Stage("decode", 7, env=(("decode_splits", "test"),)),
)


def speakers_for(hours: float, per_hour: int) -> tuple[int, int]:
    """(speakers, held out for dev and for test each): an eighth each, at least one."""
    speakers = max(6, round(per_hour * hours))
    return speakers, max(1, round(speakers / 8))


def recipe_command(stage: Stage, hours: float, work: Path, per_hour: int, nj: int,
                   extra: list[str]) -> list[str]:
    """run.sh for one stage of one size."""
    speakers, held = speakers_for(hours, per_hour)
    opts = ["--stages", RECIPE_STAGES, "--data", str(work / "data"), "--exp", str(work / "exp"),
            "--hours", f"{hours:g}", "--speakers", str(speakers), "--dev-speakers", str(held),
            "--test-speakers", str(held), "--alignments", "learned",
            "--streams", "fmllr,ivector,logmel", "--epochs", "1", "--nj", str(nj),
            "--synth-nj", str(nj)]
    for name in AUTO_SIZES:
        opts += [f"--{name.replace('_', '-')}", "auto"]
    return ["bash", str(RECIPE), *opts, *extra, *stage.options,
            "--stage", str(stage.number), "--stop-stage", str(stage.number)]


def result_path(out: Path, hours: float, stage: str) -> Path:
    return out / f"h{hours:g}" / f"{stage}.json"


def pending(out: Path, hours: list[float], stages: list[str]) -> list[tuple[float, str]]:
    """The (size, stage) pairs without a JSON, in running order: the resume."""
    order = [s.name for s in STAGES]
    return [(h, s) for h in hours for s in sorted(stages, key=order.index)
            if not result_path(out, h, s).is_file()]


# --- measuring a process tree ---

def become_subreaper() -> None:
    """Orphaned descendants are reparented here (and reaped, and counted) rather than to init."""
    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def descendants(root: int) -> list[int]:
    """Live processes under ``root`` (from /proc's parent links)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


def tree_memory_kb(pids: list[int]) -> tuple[int, int]:
    """(RSS, PSS) summed over ``pids``, in kB."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return rss, pss


def _kill_tree(pgid: int, sig: int) -> None:
    for pid in [*descendants(os.getpid())]:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


class Tree:
    """One stage's process tree: started, sampled, reaped."""

    def __init__(self, cmd: list[str], env: dict[str, str], log: Path) -> None:
        with log.open("w") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        self.rc: int | None = None
        self.max_rss_kb = 0
        self.peak_rss_kb = self.peak_pss_kb = 0
        self.seen: set[int] = set()
        self.ended_at = 0.0

    def poll(self) -> bool:
        """Sample the memory, reap what ended; True while anything of the tree is left."""
        pids = descendants(os.getpid())
        self.seen.update(pids)
        rss, pss = tree_memory_kb(pids)
        self.peak_rss_kb, self.peak_pss_kb = max(self.peak_rss_kb, rss), max(self.peak_pss_kb, pss)
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                break
            self.max_rss_kb = max(self.max_rss_kb, usage.ru_maxrss)
            if pid == self.proc.pid:
                self.rc, self.ended_at = os.waitstatus_to_exitcode(status), time.monotonic()
        if self.rc is not None and time.monotonic() - self.ended_at > 60:
            _kill_tree(self.proc.pid, signal.SIGKILL)  # a leftover job a minute after the stage
        return True

    def stop(self) -> None:
        """End the tree (the benchmark was interrupted) and reap it."""
        _kill_tree(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while self.poll():
            if time.monotonic() > deadline:
                _kill_tree(self.proc.pid, signal.SIGKILL)
            time.sleep(0.2)


def measure(cmd: list[str], env: dict[str, str], log: Path, label: str) -> dict:
    """Run ``cmd`` to its end; its wall, CPU and memory figures and exit status."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before, start = os.getloadavg()[0], time.perf_counter()
    tree = Tree(cmd, env, log)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, transient=True) as progress:
        task = progress.add_task(label)
        try:
            while tree.poll():
                progress.update(task, description=f"{label}: {_last_line(log)}")
                time.sleep(0.5)
        except KeyboardInterrupt:
            tree.stop()
            raise
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, sys_ = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    return {"rc": tree.rc, "wall_s": round(wall, 2), "user_s": round(user, 2),
            "sys_s": round(sys_, 2), "cpu_s": round(user + sys_, 2),
            "max_process_rss_mb": round(tree.max_rss_kb / 1024, 1),
            "peak_tree_pss_mb": round(tree.peak_pss_kb / 1024, 1),
            "peak_tree_rss_mb": round(tree.peak_rss_kb / 1024, 1),
            "processes": len(tree.seen), "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2)}


def _last_line(log: Path) -> str:
    try:
        with log.open("rb") as f:
            f.seek(max(0, f.seek(0, 2) - 400))
            lines = f.read().decode(errors="replace").strip().splitlines()
        return lines[-1][:90] if lines else ""
    except OSError:
        return ""


# --- the runs ---

def train_hours(work: Path) -> float | None:
    """Hours of training speech, from the sizes.sh stage features wrote."""
    sizes = work / "data" / "sizes.sh"
    if sizes.is_file():
        for line in sizes.read_text().splitlines():
            if line.startswith("hours="):
                return float(line.split("=", 1)[1])
    return None


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True).stdout


def commit() -> str:
    """HEAD, +dirty when tracked files differ from it (the tree is shared while it runs)."""
    dirty = _git("status", "--porcelain", "--untracked-files=no").strip()
    return _git("rev-parse", "--short", "HEAD").strip() + ("+dirty" if dirty else "")


#: What the recipe (``done_or_run``) and asrtrain's own resumable stages print when they skip
#: finished work: a stage that skipped measured nothing.
SKIP_MARKS = ("already complete (", ": complete, skipping")


def skipped_work(log: Path) -> str | None:
    """The first line of ``log`` saying finished work was skipped, or None."""
    with log.open(errors="replace") as fh:
        return next((line.strip() for line in fh if any(m in line for m in SKIP_MARKS)), None)


def run_stage(args: argparse.Namespace, hours: float, stage: Stage) -> bool:
    """Measure one stage of one size and write its JSON (not when it fails)."""
    path = result_path(args.out, hours, stage.name)
    work = (args.work or args.out) / f"h{hours:g}" / "work"
    path.parent.mkdir(parents=True, exist_ok=True)
    cmd = recipe_command(stage, hours, work, args.speakers_per_hour, args.nj,
                         shlex.split(args.recipe_args))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **dict(stage.env)}
    log = path.with_suffix(".log")
    started = datetime.datetime.now().isoformat(timespec="seconds")
    figures = measure(cmd, env, log, f"{hours:g} h {stage.name}")
    speakers, held = speakers_for(hours, args.speakers_per_hour)
    record = {"hours": hours, "train_hours": train_hours(work), "stage": stage.name,
              "recipe_stage": stage.number, "speakers": speakers, "dev_speakers": held,
              "test_speakers": held, **figures, "started": started, "commit": commit(),
              "cores": os.cpu_count(), "nice": os.nice(0), "nj": args.nj,
              "command": shlex.join(cmd) + "".join(f" ({k}={v})" for k, v in stage.env)}
    if figures["rc"] != 0:
        print(f"{hours:g} h {stage.name}: FAILED (exit {figures['rc']}); log: {log}")
        return False
    skipped = skipped_work(log)
    if skipped:
        print(f"{hours:g} h {stage.name}: NOT MEASURED, it skipped finished work ({skipped!r} in "
              f"{log}): remove that stage's outputs under {work} and run again")
        return False
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(path)
    print(f"{hours:g} h {stage.name}: wall {figures['wall_s']:.0f} s, CPU {figures['cpu_s']:.0f} s,"
          f" memory {figures['max_process_rss_mb']:.0f} MB (one process), "
          f"{figures['peak_tree_pss_mb']:.0f} MB (tree PSS)")
    return True


def report(out: Path, stages: list[str]) -> None:
    """Print the table from the JSONs and write it to OUT/scale.md."""
    text = markdown(summarize(load(out), stages))
    (out / "scale.md").write_text(text)
    print(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hours", type=float, nargs="+", default=[0.25, 1, 4, 16],
                        help="Corpus sizes (hours of audio, all splits).")
    parser.add_argument("--out", type=Path, required=True, help="The JSONs, logs and table.")
    parser.add_argument("--work", type=Path, help="The recipe's data and exp (default: OUT).")
    parser.add_argument("--stages", nargs="+", default=[s.name for s in STAGES],
                        choices=[s.name for s in STAGES])
    parser.add_argument("--speakers-per-hour", type=int, default=24)
    parser.add_argument("--nj", type=int, default=2, help="Jobs of every stage (the recipe's).")
    parser.add_argument("--recipe-args", default="", help="More run.sh options (one string).")
    parser.add_argument("--report", action="store_true", help="Only print the table.")
    return parser.parse_args(argv)


def _interrupted(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: the running stage's tree is ended, not left behind."""
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    args.out = args.out.resolve()
    args.work = args.work.resolve() if args.work else None
    if not args.report:
        signal.signal(signal.SIGTERM, _interrupted)
        become_subreaper()
        by_name = {s.name: s for s in STAGES}
        todo = pending(args.out, args.hours, args.stages)
        print(f"{len(todo)} stage runs to do ({len(args.hours) * len(args.stages) - len(todo)} "
              f"done) under {args.out}")
        for hours, name in todo:
            if not run_stage(args, hours, by_name[name]):
                return 1
    report(args.out, args.stages)
    return 0


if __name__ == "__main__":
    sys.exit(main())
