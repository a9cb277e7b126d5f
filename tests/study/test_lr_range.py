"""The range test: the rate climbs its ladder by step, the held-out subset is evaluated after each rung,
the run ends at the blow-up with that rung's rate, a stopped range run resumes to the same rows, and a
difference between strategies counts only beyond the seeds' spread."""

from __future__ import annotations

import json
import math
import signal

import pytest
from plot_check import C0, C1, check_plot
from study_helpers import tiny_cfg

from asrtrain.core.errors import ConfigError, Preempted
from asrtrain.distributed import signals
from asrtrain.study.lr_range import RangeConfig, divergence_table, range_specs, verdicts
from asrtrain.study.runs import Runner
from asrtrain.train.hooks import Hooks

LADDER = RangeConfig(start_lr=0.2, factor=2.0, every=3, rungs=9, held_chunks=16)


def test_the_ladder():
    assert [LADDER.rate(s) for s in (0, 2, 3, 5, 6, 26, 100)] == [0.2, 0.2, 0.4, 0.4, 0.8, 51.2, 51.2]
    assert LADDER.steps == 27 and LADDER.max_lr == pytest.approx(51.2)
    with pytest.raises(ConfigError, match="factor > 1"):
        RangeConfig(start_lr=0.1, factor=1.0)


def _specs(archives, tmp_path, seeds=(0,), clips=(5.0,)):
    base = tiny_cfg(archives, tmp_path, batch=16, base_batch=8, momentum=0.9)
    return range_specs(base, LADDER, ["ssgd", "adpsgd"], 4, list(clips), list(seeds), 102)


def test_a_range_run_climbs_and_ends_at_the_blow_up(study_archives, tmp_path):
    records = Runner(tmp_path / "out", 102).run_all(_specs(study_archives, tmp_path), "range")
    for record in records:
        rows = record["range"]
        assert rows[0]["step"] == 0 and rows[0]["lr"] == 0.0  # the untrained model's loss
        assert [r["step"] for r in rows[1:]] == list(range(3, 3 * len(rows) - 2, 3))
        assert [r["lr"] for r in rows[1:]] == pytest.approx([0.2 * 2 ** k for k in range(len(rows) - 1)])
        assert record["divergence_lr"] == rows[-1]["lr"] < LADDER.max_lr  # blown up before the top rung
        for i in range(1, len(rows)):  # each evaluation against the best before it and the untrained model
            best = min(r["valid_loss"] for r in rows[1:i + 1])
            blown = not math.isfinite(rows[i]["valid_loss"]) or \
                rows[i]["valid_loss"] > min(2 * best, rows[0]["valid_loss"])
            assert blown == (i == len(rows) - 1), i
        assert record["best_lr"] == min(rows[1:-1], key=lambda r: r["valid_loss"])["lr"]
        assert record["strategy"] == "ssgd" or all(r["spread"] > 0 for r in rows[1:])
        # the rows are the run's metrics, and the step rows' rates follow the ladder
        metrics = [json.loads(x) for x in (tmp_path / "out" / "runs" / record["name"] / "metrics.jsonl")
                   .read_text().splitlines()]
        assert [r["valid_loss"] for r in metrics if r["kind"] == "range"] == [r["valid_loss"] for r in rows]
        assert all(r["lr"] == pytest.approx(LADDER.rate(r["step"] - 1)) for r in metrics if r["kind"] == "step")


class StopAt(Hooks):
    def after_step(self, trainer, x, y, lr) -> None:
        if trainer.step == 7:
            signals._state["signal"] = signal.SIGTERM


def test_a_stopped_range_run_resumes_to_the_same_rows(study_archives, tmp_path):
    ref = Runner(tmp_path / "ref", 102).run(_specs(study_archives, tmp_path)[1])
    spec = _specs(study_archives, tmp_path)[1]
    spec.hooks = (StopAt(), *spec.hooks)
    try:
        with pytest.raises(Preempted):
            Runner(tmp_path / "out", 102).run(spec)
    finally:
        signals._state["signal"] = None
    got = Runner(tmp_path / "out", 102).run(_specs(study_archives, tmp_path)[1])
    assert got["range"] == ref["range"] and got["divergence_lr"] == ref["divergence_lr"]


def _record(strategy, clip, seed, rate):
    return {"strategy": strategy, "clip": clip, "seed": seed, "divergence_lr": rate, "diverged": None}


def test_a_difference_counts_only_beyond_the_seeds_spread():
    records = [_record("ssgd", 5.0, 0, 0.8), _record("ssgd", 5.0, 1, 1.6), _record("adpsgd", 5.0, 0, 3.2),
               _record("adpsgd", 5.0, 1, 6.4), _record("ssgd", 0.0, 0, 0.8), _record("ssgd", 0.0, 1, 3.2),
               _record("adpsgd", 0.0, 0, 1.6), _record("adpsgd", 0.0, 1, None)]
    table = divergence_table(records)
    row = next(r for r in table if r["strategy"] == "adpsgd" and r["clip"] == 0.0)
    assert row["rates"] == [1.6, math.inf] and row["low"] == 1.6
    lines = verdicts(table, [5.0, 0.0])
    assert "clip 5: ADPSGD diverges at [3.2, 6.4], SSGD at [0.8, 1.6]: higher than SSGD's beyond" in lines[0]
    assert "[1.6, none on the ladder]" in lines[1] and "not distinguishable" in lines[1]


@pytest.mark.slow  # 13 s: a study command, not the product
def test_the_range_command_writes_json_report_and_plot(study_archives, tmp_path):
    from click.testing import CliRunner

    from asrtrain.cli.main import cli

    out = tmp_path / "range"
    res = CliRunner().invoke(cli, ["study", "lr-range", *map(str, study_archives), str(out), "--learners", "4",
                                   "--batch", "16", "--base-batch", "8", "--lr", "0.2", "--hidden", "8", "--layers",
                                   "1", "--proj", "0", "--threads", "1", "--min-steps", "2", "--every", "3", "--rungs",
                                   "8", "--start", "0.5", "--clips", "0", "--seeds", "0", "--held-out-chunks", "16",
                                   "--sharpness-every", "3", "--sharpness-chunks", "4"])
    assert res.exit_code == 0, res.output
    record = json.loads((out / "lr-range.json").read_text())
    assert [(r["strategy"], r["clip"]) for r in record["table"]] == [("adpsgd", 0.0), ("ssgd", 0.0)]
    assert all(r["sharpness"] and all(x["step"] % 3 == 0 for x in r["sharpness"]) for r in record["runs"])
    report = (out / "lr-range.md").read_text()
    assert "| ssgd | 0 | 0 |" in report and "clip 0: ADPSGD diverges at" in report
    check_plot(out / "lr-range.png", 1760, 440, colours=(C0, C1))  # with sharpness: 16 x 4 in at 110 dpi


def test_the_report_takes_the_largest_finite_sharpness():
    """A probe that ran on blown-up weights measures nan: the report skips it, or says nan if all were."""
    from asrtrain.study.lr_range import _largest_ratio

    nan = float("nan")
    assert _largest_ratio([{"ratio": 0.3}, {"ratio": nan}, {"ratio": 15.5}]) == "15.5"
    assert _largest_ratio([{"ratio": nan}]) == "nan"
    assert _largest_ratio([]) == "-"
