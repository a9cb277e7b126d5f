"""A study's runs: each one resumable, each recorded once finished, so a study can stop and go on.

A study of hours runs in the background over several sessions. Every run lives in
``OUT/runs/<name>/``, a training run's experiment directory (``metrics.jsonl``,
``checkpoints/``, ``final.pt``) with three more files, each written whole and renamed
(:mod:`asrtrain.core.atomic`), so a kill never leaves one half-written:

* ``spec.json``: what the run is (its training config, simulated strategy, probes and
  extras; not where it writes or how often it saves), written when it starts. A later
  session resumes the run only under the same spec; another spec is refused, naming the
  first field that differs (a study's options changed between sessions);
* ``elapsed.json``: seconds spent on it so far, over sessions (at each epoch's end);
* ``record.json``: written when it ends (its epoch rows, best held-out loss, divergence,
  what its probes found). A run with a record is done: later sessions read the record, and
  its checkpoints (every replica's weights and momenta) are removed; ``final.pt`` stays.

The run in progress is the trainer's own resume: a mid-epoch checkpoint every
``save_every`` minutes and one at each epoch's end. SIGTERM, SIGUSR1 or a first Ctrl-C
stops it at the next step boundary after a checkpoint (:class:`Preempted`, exit 75); a
SIGKILL loses the time since the last checkpoint. :class:`Runner` shows the study's
progress (a rich bar on a terminal, a log line every minute elsewhere) with the time
left at this session's speed, and logs one line as each run starts and ends.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import ConfigError
from asrtrain.core.progress import Progress
from asrtrain.core.textio import read_text
from asrtrain.study.probes import Chain, ProbeConfig, Probes
from asrtrain.study.simulate import SimConfig, SimTrainer, simulate
from asrtrain.train import checkpoint
from asrtrain.train.config import TrainConfig
from asrtrain.train.hooks import Hooks
from asrtrain.train.metrics import epoch_rows
from asrtrain.train.trainer import Trainer, TrainingDiverged

log = logging.getLogger("asrtrain.study")

#: Options that change how a run is kept, not what it computes: a later session may change them.
BOOKKEEPING = ("exp", "resume", "save_every_minutes", "save_every_steps", "num_threads", "prefetch",
               "keep_checkpoints")


class RunEnded(Exception):  # noqa: N818 (an outcome, not an error)
    """A hook ended the run before its last epoch (a range test that found its divergence)."""


@dataclass
class RunSpec:
    """One run of a study: its training config (``exp`` is set by the runner) and what it simulates."""

    name: str
    cfg: TrainConfig
    sim: SimConfig
    probes: ProbeConfig = field(default_factory=ProbeConfig)
    extra: dict[str, Any] = field(default_factory=dict)  # the study's own parameters of the run (recorded)
    hooks: tuple[Hooks, ...] = ()                         # the study's own observers (a range test's)
    trainer_class: type[SimTrainer] = SimTrainer
    planned_steps: int | None = None                      # None: every epoch of cfg

    def key(self) -> dict[str, Any]:
        """What must be the same for a later session to continue this run (plain JSON values)."""
        cfg = {k: v for k, v in self.cfg.to_dict().items() if k not in BOOKKEEPING}
        return json.loads(json.dumps({"cfg": cfg, "sim": asdict(self.sim), "probes": asdict(self.probes),
                                      "extra": self.extra}, sort_keys=True, default=str))


def difference(a: Any, b: Any, where: str = "") -> str | None:
    """The first field where two spec keys differ, as ``path: a != b`` (None: equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            found = difference(a.get(k), b.get(k), f"{where}.{k}" if where else k)
            if found:
                return found
        return None
    return None if a == b else f"{where}: {a!r} then, {b!r} now"


def read_json(path: Path) -> Any:
    return json.loads(read_text(path))


def write_json(path: Path, value: Any) -> None:
    write_text(path, json.dumps(value, indent=1, sort_keys=True, default=str) + "\n")


class Runner:
    """Runs a study's specs in order under ``out/runs/``, skipping the finished and resuming the started."""

    def __init__(self, out: Path, chunks: int, save_every: float | None = 10.0, interval: float = 60.0) -> None:
        self.out = Path(out)
        self.chunks = chunks  # chunks of the training archive (an epoch)
        self.save_every = save_every
        self.interval = interval
        self.bar: Progress | None = None
        self._session_chunks = 0.0
        self._started = time.monotonic()

    # ----- where a run is -------------------------------------------------------------------
    def exp(self, spec: RunSpec) -> Path:
        return self.out / "runs" / spec.name

    def record(self, spec: RunSpec) -> dict[str, Any] | None:
        """The finished run's record, or None; a run kept under another spec is refused."""
        exp = self.exp(spec)
        for name in ("record.json", "spec.json"):
            if (exp / name).is_file():
                saved = read_json(exp / name)
                saved = saved.get("spec", saved) if name == "record.json" else saved
                changed = difference(saved, spec.key())
                if changed:
                    raise ConfigError(f"run {spec.name} was started with other settings ({changed}): give the "
                                      "study another OUT, or remove that run's directory to redo it", exp)
        return read_json(exp / "record.json") if (exp / "record.json").is_file() else None

    def total_chunks(self, spec: RunSpec) -> int:
        """Chunks the whole run trains (an epoch is every chunk; a range test its planned steps)."""
        if spec.planned_steps is not None:
            return spec.planned_steps * spec.cfg.batch
        return spec.cfg.epochs * self.chunks

    def chunks_done(self, spec: RunSpec) -> int:
        """Chunks the run's newest checkpoint has trained (0 for a run not started)."""
        path = checkpoint.last_checkpoint(self.exp(spec))
        if path is None or not (self.exp(spec) / "spec.json").is_file():
            return 0
        trainer = checkpoint.load_checkpoint(path)["trainer"]
        return self._chunks_at(spec.cfg, int(trainer["step"]), int(trainer["epoch"]))

    def _chunks_at(self, cfg: TrainConfig, step: int, epochs_done: int) -> int:
        steps, _ = cfg.epoch_steps(self.chunks)
        return epochs_done * self.chunks + max(step - epochs_done * steps, 0) * cfg.batch

    # ----- the study ------------------------------------------------------------------------
    def run_all(self, specs: list[RunSpec], title: str) -> list[dict[str, Any]]:
        """Every spec's record, running what is not finished (in order); progress with the time left."""
        names = [s.name for s in specs]
        if len(set(names)) != len(names):
            raise ConfigError(f"two runs of the study share a name: {sorted({n for n in names if names.count(n) > 1})}")
        records: dict[str, dict[str, Any]] = {}
        pending = []
        for spec in specs:
            done = self.record(spec)
            if done is not None:
                records[spec.name] = done
            else:
                pending.append(spec)
        left = {s.name: self.total_chunks(s) - self.chunks_done(s) for s in pending}
        log.info("%s: %d run(s), %d finished before, %d to run (%.3g chunk-epochs)", title, len(specs),
                 len(records), len(pending), sum(left.values()) / max(self.chunks, 1))
        with Progress(title, total=float(sum(left.values())), interval=self.interval, unit=" chunks") as bar:
            self.bar = bar
            try:
                for i, spec in enumerate(pending, 1):
                    log.info("[%d/%d] %s: %s", i, len(pending), spec.name, describe(spec, self.chunks))
                    records[spec.name] = self.run(spec, left[spec.name])
                    log.info("[%d/%d] %s: %s; %s", i, len(pending), spec.name, outcome(records[spec.name]),
                             self.time_left(sum(left[s.name] for s in pending[i:])))
            finally:
                self.bar = None
        return [records[s.name] for s in specs]

    def time_left(self, chunks: float) -> str:
        """The time ``chunks`` more take at this session's speed so far."""
        seconds = time.monotonic() - self._started
        if self._session_chunks <= 0 or chunks <= 0:
            return "nothing left" if chunks <= 0 else "time left unknown yet"
        return f"about {hours(chunks * seconds / self._session_chunks)} left"

    def run(self, spec: RunSpec, expected: int | None = None) -> dict[str, Any]:
        """Train (or resume) one run to its end and write its record."""
        exp = self.exp(spec)
        started = (exp / "spec.json").is_file()
        if not started:
            exp.mkdir(parents=True, exist_ok=True)
            write_json(exp / "spec.json", spec.key())
        cfg = replace(spec.cfg, exp=exp, resume=started, keep_checkpoints=1, save_every_minutes=self.save_every)
        clock = Clock(exp, self)
        hooks = Chain(clock, Probes(spec.probes), *spec.hooks)
        diverged = None
        try:
            simulate(cfg, spec.sim, hooks, spec.trainer_class)
        except TrainingDiverged as exc:  # a rate too large for its batch: a result of the study
            diverged = str(exc)
            log.warning("%s: %s", spec.name, exc)
        except RunEnded as exc:
            log.info("%s: %s", spec.name, exc)
        finally:  # also when stopped (preempted, Ctrl-C): the time since the last epoch's end counts too
            seconds = clock.save()
        if self.bar is not None and expected is not None:  # a run that ended early needs no more of its chunks
            self.bar.set_total(self.bar.total - (expected - clock.trained) if self.bar.total else 0.0)
        record = make_record(spec, exp, seconds, diverged)
        for hook in spec.hooks:
            record.update(getattr(hook, "result", dict)())
        write_json(exp / "record.json", record)
        shutil.rmtree(checkpoint.checkpoint_dir(exp), ignore_errors=True)  # 16 replicas' weights: done with
        return record


class Clock(Hooks):
    """Counts a run's chunks into the study's progress and its seconds into ``elapsed.json``."""

    def __init__(self, exp: Path, runner: Runner) -> None:
        self.path = exp / "elapsed.json"
        self.before = float(read_json(self.path)["seconds"]) if self.path.is_file() else 0.0
        self.start_time = time.monotonic()
        self.runner = runner
        self.trained = 0

    def after_step(self, trainer: Trainer, x: Any, y: Any, lr: float) -> None:
        n = len(y)
        self.trained += n
        self.runner._session_chunks += n
        if self.runner.bar is not None:
            self.runner.bar.advance(n)

    def end_epoch(self, trainer: Trainer, row: dict[str, Any]) -> None:
        self.save()

    def save(self) -> float:
        seconds = self.before + time.monotonic() - self.start_time
        write_json(self.path, {"seconds": round(seconds, 3)})
        return seconds


def make_record(spec: RunSpec, exp: Path, seconds: float, diverged: str | None) -> dict[str, Any]:
    """A finished run: its spec, epoch rows, best held-out loss, divergence, where its model is."""
    metrics = exp / "metrics.jsonl"
    history = epoch_rows(metrics) if metrics.is_file() else []
    final = exp / "final.pt"
    losses = [float(r["valid_loss"]) for r in history if isinstance(r.get("valid_loss"), (int, float))]
    return {"name": spec.name, "spec": spec.key(), "batch": spec.cfg.batch, "strategy": spec.sim.strategy,
            "learners": spec.sim.learners, "lr": spec.cfg.lr, "peak_lr": spec.cfg.lr * spec.cfg.batch / spec.cfg.base_batch,
            "seconds": round(seconds, 3), "history": history, "final": str(final) if final.is_file() else None,
            "diverged": diverged, "best_valid_loss": min((v for v in losses if math.isfinite(v)), default=math.inf),
            **spec.extra}


def select_runs(specs: list[RunSpec], pattern: str | None) -> list[RunSpec]:
    """The specs whose names match the glob ``pattern`` (all without one); none matching is an error."""
    import fnmatch

    if pattern is None:
        return specs
    chosen = [s for s in specs if fnmatch.fnmatchcase(s.name, pattern)]
    if not chosen:
        raise ConfigError(f"--runs {pattern!r} matches no run of the study (its runs: "
                          f"{', '.join(s.name for s in specs)})")
    return chosen


def describe(spec: RunSpec, chunks: int) -> str:
    """One line of what a run is: strategy, learners, batch, peak rate, steps."""
    cfg, sim = spec.cfg, spec.sim
    steps, _ = cfg.epoch_steps(chunks)
    what = "one learner" if sim.strategy == "ssgd" and sim.learners == 1 else f"{sim.strategy} over {sim.learners}"
    ladder = spec.extra.get("range_config")
    if ladder:
        rates = f"rates {ladder['start_lr']:.4g} ×{ladder['factor']:g} every {ladder['every']} steps"
        return f"{what}, batch {cfg.batch}, {rates}, clip {cfg.clip:g}, seed {cfg.seed}, {spec.planned_steps} steps"
    return f"{what}, batch {cfg.batch}, peak rate {cfg.lr * cfg.batch / cfg.base_batch:.4g}, " \
           f"{cfg.epochs} epochs of {steps} steps"


def outcome(record: dict[str, Any]) -> str:
    """One line of how a run ended."""
    if record.get("range_end"):
        return f"{record['range_end']} after {hours(record['seconds'])}"
    if record.get("diverged"):
        return f"diverged after {hours(record['seconds'])}"
    return f"best held-out loss {record['best_valid_loss']:.4f} in {hours(record['seconds'])}"


def hours(seconds: float) -> str:
    """``1h05m``, ``12m``, ``40s``."""
    seconds = max(float(seconds), 0.0)
    if seconds >= 3600:
        return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
    return f"{int(seconds // 60)}m" if seconds >= 60 else f"{seconds:.0f}s"
