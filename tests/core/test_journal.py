"""Append-only files a kill tore: every reader takes the complete lines and goes on; every writer that
appends again starts on a line of its own."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from asrtrain.core.errors import InputError
from asrtrain.core.journal import end_torn_line, read_jsonl

ROWS = [{"kind": "step", "epoch": 1, "step": 10}, {"kind": "epoch", "epoch": 1, "step": 10, "train_loss": 1.5}]
TORN = '{"kind": "step", "epoch": 2, "st'


def _jsonl(path: Path, tail: str = TORN) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS) + tail, encoding="utf-8")
    return path


def test_a_torn_last_row_is_dropped_with_a_warning(tmp_path, caplog):
    path = _jsonl(tmp_path / "metrics.jsonl")
    with caplog.at_level(logging.WARNING, logger="asrtrain.journal"):
        assert read_jsonl(path) == ROWS
    assert f"{path}: line 3 was cut off by a killed run ({len(TORN)} bytes): dropped" in caplog.text


def test_a_torn_multibyte_character_is_a_tear_not_an_encoding_error(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in ROWS) + '{"word": "caf\u00e9'.encode()[:-1])
    assert read_jsonl(path) == ROWS


def test_a_last_row_without_its_line_end_is_complete_and_kept(tmp_path):
    path = _jsonl(tmp_path / "m.jsonl", tail='{"kind": "select", "epoch": 1}')
    assert read_jsonl(path)[-1] == {"kind": "select", "epoch": 1}


def test_a_bad_row_before_the_last_is_an_error_naming_it(tmp_path):
    path = _jsonl(tmp_path / "m.jsonl", tail=TORN + "\n" + json.dumps(ROWS[0]) + "\n")
    with pytest.raises(InputError, match=r"m.jsonl: line 3: not JSON"):
        read_jsonl(path)


def test_end_torn_line_keeps_the_fragment_and_starts_a_new_line(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("line 1\nkilled in the midd")
    assert end_torn_line(log) is True
    with open(log, "a") as fh:
        fh.write("next run\n")
    assert log.read_text().splitlines() == ["line 1", "killed in the midd", "next run"]
    assert end_torn_line(log) is False and end_torn_line(tmp_path / "absent.log") is False


def test_a_learners_rank_log_torn_by_a_kill(tmp_path):
    """``EXP/log/train.rank<R>.log`` is appended to run after run."""
    from asrtrain.distributed.logs import LogSpec, learner_logging, rank_log_path

    path = rank_log_path(tmp_path, 1)
    path.write_text("# learner rank 1, pid 1, started x\n2024 INFO epoch 1: train lo")
    with learner_logging(LogSpec(tmp_path), 1):
        logging.getLogger("asrtrain").warning("the rerun says this")
    lines = path.read_text().splitlines()
    assert lines[1] == "2024 INFO epoch 1: train lo"
    assert lines[2].startswith("# learner rank 1, pid ")
    assert lines[3].endswith("the rerun says this")


def test_the_log_file_option_torn_by_a_kill(tmp_path):
    """``asrtrain --log-file FILE`` appends to FILE run after run."""
    from asrtrain.cli.main import setup_logging

    path = tmp_path / "all.log"
    path.write_text("12:00 INFO first run\n12:01 INFO cut o")
    logger = logging.getLogger("asrtrain")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        setup_logging(0, str(path))
        logger.info("second run")
    finally:
        for h in logger.handlers:
            if h not in saved[0]:
                h.close()
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]
    lines = path.read_text().splitlines()
    assert lines[:2] == ["12:00 INFO first run", "12:01 INFO cut o"] and lines[2].endswith("second run")
