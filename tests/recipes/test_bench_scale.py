"""scripts/bench_scale.py's pure parts: the growth fit, the cluster's extrapolation, the table,
and the resume (a stage with its JSON is not run again). The stages themselves are not run."""

from __future__ import annotations

import importlib
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _module(name: str) -> ModuleType:
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))  # bench_scale imports bench_scale_table
    return importlib.import_module(name)


@pytest.fixture(scope="module")
def table() -> ModuleType:
    return _module("bench_scale_table")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return _module("bench_scale")


def _record(stage: str, hours: float, cpu: float, mem_mb: float, **extra: float) -> dict:
    return {"stage": stage, "hours": hours, "train_hours": hours * 0.75, "cpu_s": cpu,
            "wall_s": cpu, "peak_tree_pss_mb": mem_mb, "max_process_rss_mb": mem_mb / 2, **extra}


def test_the_exponent_of_a_power_law_is_recovered(table: ModuleType) -> None:
    hours = [0.25, 1, 4, 16]
    f = table.fit(hours, [3 * h ** 1.5 for h in hours])
    assert f.exponent == pytest.approx(1.5) and f.coef == pytest.approx(3)
    assert f.at(960) == pytest.approx(3 * 960 ** 1.5)
    assert table.fit([1, 1], [2, 3]) is None  # one size: no growth to fit


def test_a_constant_plus_a_line_is_extrapolated_by_the_line(table: ModuleType) -> None:
    """A fixed cost flattens the log-log exponent; the straight line keeps the growth."""
    hours = [0.25, 1, 4, 16]
    f = table.fit(hours, [100 + 10 * h for h in hours])
    assert f.exponent < 0.5
    assert f.at(960) == pytest.approx(100 + 10 * 960)


def test_cluster_time_divides_by_the_cores_a_stage_can_use(table: ModuleType) -> None:
    assert table.cluster_seconds("lang", 3600, 960) == 3600
    assert table.cluster_seconds("features", 6400, 960) == pytest.approx(100)
    assert table.cluster_seconds("align", 5120, 960) == pytest.approx(10)
    # training: an epoch of 960 h on 64 H200s at 1.12M frames/s each
    assert table.cluster_seconds("train", 1e9, 960) == pytest.approx(960 * 360_000 / 64 / 1.12e6)


def test_memory_over_a_node_is_flagged_and_a_missing_size_is_pending(table: ModuleType) -> None:
    records = [_record("lang", h, 10 * h, 1000 * h) for h in (0.25, 1, 4)]  # ~1 GB an hour
    records += [_record("fmllr", h, 5, 200) for h in (0.25, 1)]
    rows = table.summarize(records, ["corpus", "fmllr", "lang"])
    assert [r["stage"] for r in rows] == ["fmllr", "lang"]
    lang = rows[1]["at"][960.0]
    assert lang["over"] and lang["mem_gb"] == pytest.approx(960 / 0.75 * 1000 / 1024)
    assert lang["cluster_h"] == pytest.approx(lang["cpu_core_h"])  # one process
    assert not rows[0]["at"][2000.0]["over"]
    text = table.markdown(rows)
    assert "**!**" in text and "pending" in text  # fmllr was not run at 4 h
    assert math.isclose(rows[1]["fits"]["cpu"].exponent, 1.0)
    assert table.memory_growth(rows[1]["measured"]) == pytest.approx(4)  # 4 h over 1 h


def test_load_gives_the_corpus_stage_its_sizes_training_hours(tmp_path: Path,
                                                              table: ModuleType) -> None:
    (tmp_path / "h1").mkdir()
    for stage, train in (("corpus", None), ("features", 0.74)):
        record = _record(stage, 1, 1, 1) | {"train_hours": train}
        (tmp_path / "h1" / f"{stage}.json").write_text(json.dumps(record))
    assert {r["train_hours"] for r in table.load(tmp_path)} == {0.74}


def test_a_stage_with_its_json_is_skipped(tmp_path: Path, bench: ModuleType) -> None:
    path = bench.result_path(tmp_path, 0.25, "features")
    path.parent.mkdir(parents=True)
    path.write_text("{}")
    todo = bench.pending(tmp_path, [0.25, 1], ["lang", "features", "corpus"])
    assert todo == [(0.25, "corpus"), (0.25, "lang"),
                    (1, "corpus"), (1, "features"), (1, "lang")]


def test_a_stage_is_its_recipe_stage_alone(tmp_path: Path, bench: ModuleType) -> None:
    stage = next(s for s in bench.STAGES if s.name == "fmllr")
    cmd = bench.recipe_command(stage, 4, tmp_path, 24, 2, ["--beam", "10"])
    assert cmd[-4:] == ["--stage", "3", "--stop-stage", "3"]
    assert cmd[-6:-4] == ["--streams", "fmllr"]  # after the papers' three: it wins
    assert cmd[cmd.index("--speakers") + 1] == "96" and cmd[cmd.index("--test-speakers") + 1] == "12"
    assert cmd[cmd.index("--hidden") + 1] == "auto" and "--beam" in cmd


def test_a_stage_that_skipped_finished_work_is_not_a_measurement(bench: ModuleType,
                                                                 tmp_path: Path) -> None:
    """A rerun whose command found its outputs complete measured nothing (seen: 1 h fMLLR in 9 s)."""
    log = tmp_path / "fmllr.log"
    log.write_text("[20:04:01] fmllr-train: asrtrain prepare fmllr ...\n"
                   "20:04:05 INFO stage lda: complete, skipping\n")
    assert bench.skipped_work(log) == "20:04:05 INFO stage lda: complete, skipping"
    log.write_text("[20:04:01] ivectors-train: already complete (exp/ivectors/.done.x), skipping\n")
    assert bench.skipped_work(log) is not None
    log.write_text("20:04:05 INFO stage lda: running\n20:04:09 INFO stage gmm: running\n")
    assert bench.skipped_work(log) is None
