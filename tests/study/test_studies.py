"""The study commands end to end on a tiny corpus: records, JSON, report and plots; refusals before
anything runs; a study stopped in the middle of a run goes on to the records an unstopped one writes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner
from plot_check import C0, check_plot
from study_helpers import tiny_cfg

from asrtrain.cli.main import cli
from asrtrain.core.errors import Preempted
from asrtrain.distributed import signals
from asrtrain.study import runs as runs_module
from asrtrain.study.probes import ProbeConfig
from asrtrain.study.runs import Runner, RunSpec
from asrtrain.study.simulate import SimConfig
from asrtrain.train.hooks import Hooks

SMALL = ["--epochs", "2", "--base-batch", "8", "--lr", "0.2", "--warmup-epochs", "0", "--hidden", "8",
         "--layers", "1", "--proj", "0", "--threads", "1", "--min-steps", "3"]
TIMING = {"time", "seconds", "frames_per_s"}


def _invoke(*args: str):
    return CliRunner().invoke(cli, ["study", *map(str, args)])


def test_batch_study_writes_records_json_report_and_plots(study_archives, tmp_path):
    out = tmp_path / "study"
    args = ["--learners", "4", "--batches", "32", "--rate-multipliers", "1,3", "--spread-every", "2", *SMALL]
    res = _invoke("batch", *study_archives, out, *args)
    assert res.exit_code == 0, res.output
    record = json.loads((out / "batch.json").read_text())
    assert [(r["strategy"], r["batch"]) for r in record["rows"]] == [("ssgd", 8), ("ssgd", 32), ("adpsgd", 32)]
    names = {r["name"] for r in record["runs"]}  # gossip at the base batch only when it is listed
    assert names == {f"{s}-{b}-x{m}" for s, bs in (("ssgd", (8, 32)), ("adpsgd", (32,))) for b in bs
                     for m in (1, 3)}
    assert record["baseline"] in ("ssgd-8-x1", "ssgd-8-x3")
    run = next(r for r in record["runs"] if r["name"] == "adpsgd-32-x3")
    assert run["peak_lr"] == pytest.approx(0.2 * 3 * 32 / 8) and run["multiplier"] == 3
    assert (out / "runs" / "adpsgd-32-x3" / "record.json").is_file()
    # the spread beside the loss: every 2 steps, and in each epoch row (before the global average)
    rows = [json.loads(x) for x in (out / "runs" / "adpsgd-32-x1" / "metrics.jsonl").read_text().splitlines()]
    spread = [r for r in rows if r["kind"] == "spread"]
    assert [r["step"] for r in spread] == [2, 4, 6, 8]  # 4 steps an epoch, 2 epochs
    assert all(r["spread"] > 0 for r in spread)
    assert all(r["spread"] > 0 for r in rows if r["kind"] == "epoch")
    assert not any(r["kind"] == "spread" for r in json.loads("[" + ",".join(
        (out / "runs" / "ssgd-8-x1" / "metrics.jsonl").read_text().splitlines()) + "]"))  # SSGD: one replica
    check_plot(out / "batch-heldout.png", 1144, 440, colours=(C0,))  # 2 strategies: 10.4 x 4 in, 110 dpi
    check_plot(out / "batch-largest.png", 1210, 440, colours=(C0,))  # 11 x 4 in
    check_plot(out / "batch-spread.png", 880, 572, colours=(C0,))  # loss and spread: 8 x 5.2 in
    report = (out / "batch.md").read_text()
    assert "largest batch within the margin" in report and "| adpsgd | 32 |" in report and "| adpsgd | 8 |" not in report
    assert "edge of the grid" in report  # two multipliers: the baseline's best is always at an edge
    # a second session finds every run done and trains nothing
    res = _invoke("batch", *study_archives, out, *args)
    assert res.exit_code == 0 and json.loads((out / "batch.json").read_text())["rows"] == record["rows"]
    # and refuses to mix in runs of other settings
    res = _invoke("batch", *study_archives, out, *args, "--momentum", "0.5")
    assert res.exit_code == 1 and "started with other settings (cfg.momentum: 0.9 then, 0.5 now)" in res.output


def test_hierarchy_and_topology_commands(study_archives, tmp_path):
    out = tmp_path / "study"
    res = _invoke("hierarchy", *study_archives, out, "--learners", "4", "--group", "2", "--batch", "16", *SMALL)
    assert res.exit_code == 0, res.output
    assert [r["name"] for r in json.loads((out / "hierarchy.json").read_text())["runs"]] == ["h-adpsgd-4x2", "adpsgd-2"]
    res = _invoke("topology", out, "--sizes", "4,8")
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "topology.json").read_text())["consensus"]
    assert all(r["measured"] <= r["bound"] + 1e-9 for r in rows)


@pytest.mark.parametrize("args, message", [
    (["--batches", "x"], "expected integers"),
    (["--batches", "8,30"], "batch(es) 30 not a multiple of 4 learners"),
    (["--batches", "32", "--learners", "1"], "adpsgd over 1 learner(s): gossip needs 2 learners at least"),
    (["--batches", "32", "--strategies", "ssgd,h-adpsgd", "--group", "4"],
     "h-adpsgd over 4 learners in super-learners of 4: 1 super-learner(s), gossip needs 2 at least"),
    (["--batches", "32", "--strategies", "h-adpsgd", "--group", "3"], "4 learners do not split into super-learners of 3"),
    (["--batches", "32", "--min-steps", "4"],
     "102 chunks make 3 steps an epoch at batch 32, fewer than the 4 required (--min-steps): use batches up to 25, "
     "or a corpus of 128 chunks at least"),
    (["--batches", "32", "--rate-multipliers", "0"], "rate multipliers must be positive"),
])
def test_refused_before_anything_runs(study_archives, tmp_path, args, message):
    out = tmp_path / "study"
    res = _invoke("batch", *study_archives, out, "--learners", "4", *SMALL, *args)
    assert res.exit_code in (1, 2) and message in res.output, res.output
    assert not out.exists()  # not even a log: nothing ran


def test_range_refusals_and_dry_run(study_archives, tmp_path):
    out = tmp_path / "r"
    common = [*study_archives, out, "--base-batch", "8", "--hidden", "8", "--layers", "1", "--proj", "0"]
    res = _invoke("lr-range", *common, "--batch", "64", "--learners", "4")
    assert res.exit_code == 1 and "102 chunks make 1 steps an epoch at batch 64, fewer than the 100" in res.output
    res = _invoke("lr-range", *common, "--batch", "16", "--learners", "1", "--min-steps", "0")
    assert res.exit_code == 1 and "gossip needs 2 learners" in res.output
    res = _invoke("lr-range", *common, "--batch", "16", "--learners", "4", "--min-steps", "0", "--dry-run",
                  "--seeds", "0,1,2", "--rungs", "4", "--every", "5")
    assert res.exit_code == 0, res.output
    assert "12 runs, 3840 chunks to train" in res.output  # 2 strategies × 2 clips × 3 seeds, 20 steps of 16
    assert not out.exists()


class StopAt(Hooks):
    def __init__(self, k: int) -> None:
        self.k = k

    def after_step(self, trainer, x, y, lr) -> None:
        if trainer.step == self.k:
            signals._state["signal"] = signal.SIGTERM


def _specs(archives, tmp_path, stop: int | None = None) -> list[RunSpec]:
    probes = ProbeConfig(spread_every=3)
    first = RunSpec("a", tiny_cfg(archives, tmp_path, epochs=2), SimConfig("ssgd", learners=1), probes)
    second = RunSpec("b", tiny_cfg(archives, tmp_path, epochs=2, batch=32), SimConfig("adpsgd", learners=4), probes,
                     hooks=(StopAt(stop),) if stop else ())
    return [first, second]


def _strip(records: list[dict]) -> list[dict]:
    out = []
    for r in records:
        r = {k: v for k, v in r.items() if k not in ("seconds", "final")}
        r["history"] = [{k: v for k, v in h.items() if k not in TIMING} for h in r["history"]]
        out.append(r)
    return out


class ElapsedAtEpochEnd(Hooks):
    """Reads the run's elapsed.json after each epoch's end (the clock writes it first)."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, []

    def end_epoch(self, trainer, row) -> None:
        self.seen.append(json.loads(self.path.read_text())["seconds"])


def test_a_stopped_study_goes_on_to_the_same_records(study_archives, tmp_path):
    ref = Runner(tmp_path / "ref", 102).run_all(_specs(study_archives, tmp_path), "ref")
    out = tmp_path / "stopped"
    specs = _specs(study_archives, tmp_path, stop=5)
    watch = ElapsedAtEpochEnd(out / "runs" / "b" / "elapsed.json")
    specs[1].hooks = (*specs[1].hooks, watch)
    try:
        with pytest.raises(Preempted):
            Runner(out, 102).run_all(specs, "stopped")
    finally:
        signals._state["signal"] = None
    # the stop came in epoch 2: its seconds so far are kept, not only those to epoch 1's end
    assert len(watch.seen) == 1
    assert json.loads((out / "runs" / "b" / "elapsed.json").read_text())["seconds"] > watch.seen[0]
    assert (out / "runs" / "a" / "record.json").is_file() and not (out / "runs" / "b" / "record.json").exists()
    assert (out / "runs" / "b" / "spec.json").is_file()
    runner = Runner(out, 102)
    assert runner.chunks_done(_specs(study_archives, tmp_path)[1]) == 102 + 32  # step 5: epoch 2, step 1
    got = runner.run_all(_specs(study_archives, tmp_path), "resumed")
    assert _strip(got) == _strip(ref)
    elapsed = json.loads((out / "runs" / "b" / "elapsed.json").read_text())["seconds"]
    assert elapsed == pytest.approx(got[1]["seconds"], abs=1e-3) and elapsed > 0


def test_a_run_that_diverges_is_a_result_not_a_crash(study_archives, tmp_path, monkeypatch):
    """A loss that is not finite (the trainer's TrainingDiverged) is recorded; the study goes on.
    (Cross-entropy stays finite even at absurd rates on this tiny model, so the trainer's stop is staged.)"""
    from asrtrain.train.trainer import TrainingDiverged

    def diverge(cfg, sim, hooks=None, trainer_class=None):
        raise TrainingDiverged("step 3 (epoch 1): the training loss is not finite; training stopped")

    monkeypatch.setattr(runs_module, "simulate", diverge)
    spec = RunSpec("big", tiny_cfg(study_archives, tmp_path), SimConfig("adpsgd", learners=4))
    record = Runner(tmp_path, 102).run(spec)
    assert "not finite" in record["diverged"] and record["final"] is None and record["history"] == []
    assert record["best_valid_loss"] == float("inf")
    assert json.loads((tmp_path / "runs" / "big" / "record.json").read_text())["diverged"] == record["diverged"]


def test_spec_differences_are_named():
    from asrtrain.study.runs import difference

    assert difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "a.c: 2 then, 3 now"
    assert difference({"a": 1}, {"a": 1}) is None


def test_paths_are_kept_apart(tmp_path: Path):
    assert Runner(tmp_path, 10).exp(RunSpec("x", tiny_cfg((tmp_path, tmp_path), tmp_path), SimConfig("ssgd", 1))) \
        == tmp_path / "runs" / "x"


def test_a_study_split_over_lanes_reports_what_has_finished(study_archives, tmp_path):
    """--runs trains a share; copied together, the runs make the whole study, which trains nothing more."""
    import shutil

    args = ["--learners", "4", "--batches", "32", "--rate-multipliers", "1,3", *SMALL]
    lane_a, lane_b = tmp_path / "a", tmp_path / "b"
    res = _invoke("batch", *study_archives, lane_a, *args, "--runs", "adpsgd-*")
    assert res.exit_code == 0 and "no baseline run (8 chunks) finished yet" in res.output, res.output
    assert sorted(p.name for p in (lane_a / "runs").iterdir()) == ["adpsgd-32-x1", "adpsgd-32-x3"]
    res = _invoke("batch", *study_archives, lane_b, *args, "--runs", "ssgd-8-*")
    assert res.exit_code == 0 and "(4 run(s) of the grid not finished)" in res.output, res.output
    assert (lane_b / "batch.md").read_text().startswith("**Partial: 4 run(s) of the grid not finished** "
                                                        "(ssgd-32-x1, ssgd-32-x3, adpsgd-32-x1, adpsgd-32-x3)")
    for run in (lane_a / "runs").iterdir():
        shutil.copytree(run, lane_b / "runs" / run.name)
    res = _invoke("batch", *study_archives, lane_b, *args, "--runs", "ssgd-32-x1")
    record = json.loads((lane_b / "batch.json").read_text())
    assert res.exit_code == 0 and record["missing_runs"] == ["ssgd-32-x3"]
    assert {r["strategy"] for r in record["rows"]} == {"ssgd", "adpsgd"}
    res = _invoke("batch", *study_archives, lane_b, *args, "--runs", "adpsgd-64-*")
    assert res.exit_code == 1 and "--runs 'adpsgd-64-*' matches no run of the study" in res.output
