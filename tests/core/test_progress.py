"""Progress without a terminal: periodic log lines instead of a bar."""

from __future__ import annotations

import logging

import pytest

from asrtrain.core.progress import Progress, track


def test_non_tty_logs_periodically_and_at_the_end(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="asrtrain.progress")
    with Progress("work", total=3, interval=0.0, enabled=False) as bar:
        for _ in range(3):
            bar.advance(1, loss=0.5)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4  # one per advance (interval 0) and one final
    assert lines[-1].startswith("work: 3/3") and "loss 0.5" in lines[-1]


def test_track_yields_everything(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="asrtrain.progress")
    assert list(track(range(5), "items")) == [0, 1, 2, 3, 4]
    assert caplog.records[-1].getMessage().startswith("items: 5/5")


def test_set_done_reports_work_counted_elsewhere(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="asrtrain.progress")
    with Progress("epoch 1/2", total=24, interval=0.0, enabled=False, unit=" blocks") as bar:
        bar.set_done(10, step=3)
        bar.set_done(24, step=9)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("epoch 1/2: 10/24 blocks") and "step 3" in lines[0]
    assert lines[-1].startswith("epoch 1/2: 24/24 blocks") and bar.done == 24
