"""A ``segments`` line whose times are not a span is an error saying what is wrong with it.

An end before its start (usually swapped columns) was cut to no samples and skipped as
"shorter than one frame"; every step that reads segments now refuses it in one line naming
the file, the line and the utterance, with the times as given.
"""

from __future__ import annotations

import pytest
from datadir_helpers import make_dir
from feature_helpers import make_audio_dir

from asrtrain.data.kaldi_dir import read_table, write_table
from asrtrain.data.segments import Segment, span_problem


@pytest.mark.parametrize(("start", "end", "problem"), [
    (3.0, 2.0, "ends at 2 s, before it starts at 3 s (start and end swapped?)"),
    (1.5, 1.5, "is empty: it starts and ends at 1.5 s"),
    (-0.5, 2.0, "starts at -0.5 s, before the recording does"),
    (1.0, -2.0, "ends at -2 s (-1 means the end of the recording"),
    (1.0, float("nan"), "has a non-finite time"),
])
def test_what_is_wrong_is_said(start: float, end: float, problem: str) -> None:
    got = span_problem(Segment("rec", start, end))
    assert got is not None and got.startswith(problem)


@pytest.mark.parametrize(("start", "end"), [(0.0, 1.0), (0.5, -1.0)])
def test_spans_are_accepted(start: float, end: float) -> None:
    assert span_problem(Segment("rec", start, end)) is None


def test_features_refuse_an_end_before_the_start(tmp_path, run_cli, one_error) -> None:
    data = make_audio_dir(tmp_path, {"spkA-rec": 2.0})
    wav = read_table(data / "wav.scp")
    write_table(data / "wav.scp", {"recA": wav["spkA-rec"]})
    segments = {"spkA-1": "recA 0.00 1.00", "spkA-2": "recA 1.80 1.20"}
    write_table(data / "segments", segments)
    write_table(data / "utt2spk", {u: "spkA" for u in segments})
    write_table(data / "spk2utt", {"spkA": "spkA-1 spkA-2"})
    proc = run_cli("prepare", "features", data, tmp_path / "f", "--nj", 1)
    one_error(proc.stderr, 1, proc.returncode, f"{data / 'segments'}: line 2: utterance 'spkA-2' "
              "ends at 1.2 s, before it starts at 1.8 s")
    assert not (tmp_path / "f" / "feats.scp").exists()


def test_other_steps_read_segments_alike(tmp_path, run_cli, one_error) -> None:
    data = make_dir(tmp_path / "data", {"a": 2, "b": 2}, segments=True)
    first = next(iter(read_table(data / "segments")))
    table = read_table(data / "segments")
    reco = table[first].split()[0]
    table[first] = f"{reco} 4 3"
    write_table(data / "segments", table)
    proc = run_cli("prepare", "subset", data, tmp_path / "tr", tmp_path / "dv", "--dev-speakers", 1)
    one_error(proc.stdout + proc.stderr, 1, proc.returncode, str(data / "segments"),
              f"utterance '{first}' ends at 3 s, before it starts at 4 s")
