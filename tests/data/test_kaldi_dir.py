"""The Kaldi data-dir readers and validator: a good dir passes, each kind of damage is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrtrain.core.errors import InputError
from asrtrain.data.kaldi_dir import (
    read_spk2gender,
    read_spk2utt,
    read_text,
    read_utt2dur,
    read_utt2spk,
    spk2utt_from_utt2spk,
    validate_data_dir,
    write_table,
)

UTTS = {"spk-0001-000001": "spk-0001", "spk-0001-000002": "spk-0001",
        "spk-0002-000001": "spk-0002"}


def make_dir(root: Path) -> Path:
    write_table(root / "utt2spk", UTTS)
    write_table(root / "spk2utt", spk2utt_from_utt2spk(UTTS))
    write_table(root / "text", {u: ["HELLO", "WORLD"] for u in UTTS})
    write_table(root / "wav.scp", {u: f"/x/{u}.flac" for u in UTTS})
    write_table(root / "utt2dur", {u: "1.25" for u in UTTS})
    write_table(root / "spk2gender", {"spk-0001": "f", "spk-0002": "m"})
    return root


def test_good_dir_passes_and_reads(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    summary = validate_data_dir(root, require=("text", "wav.scp", "utt2dur"))
    assert summary.utterances == sorted(UTTS)
    assert summary.speakers == ["spk-0001", "spk-0002"]
    assert set(summary.files) >= {"text", "wav.scp", "utt2dur", "spk2gender"}
    assert read_text(root / "text")["spk-0002-000001"] == ["HELLO", "WORLD"]
    assert read_utt2spk(root / "utt2spk") == UTTS
    assert read_spk2utt(root / "spk2utt")["spk-0001"] == ["spk-0001-000001", "spk-0001-000002"]
    assert read_utt2dur(root / "utt2dur")["spk-0001-000001"] == 1.25
    assert read_spk2gender(root / "spk2gender") == {"spk-0001": "f", "spk-0002": "m"}


def test_write_table_sorts_in_c_order(tmp_path: Path) -> None:
    write_table(tmp_path / "t", {"b": "1", "B": "2", "a-1": "3", "a": "4"})
    assert [line.split()[0] for line in (tmp_path / "t").read_text().splitlines()] == \
        ["B", "a", "a-1", "b"]


def _damage(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)


@pytest.mark.parametrize("name,content,needle", [
    ("utt2spk", "spk-0001-000002 spk-0001\nspk-0001-000001 spk-0001\nspk-0002-000001 spk-0002\n",
     "line 2: key 'spk-0001-000001' is not in sorted"),
    ("text", "spk-0001-000001 A\nspk-0001-000002 B\n", "1 utterance(s) of utt2spk missing"),
    ("text", "spk-0001-000001 A\nspk-0001-000001 B\n", "line 2: duplicate key"),
    ("wav.scp", "spk-0001-000001 /a\nspk-0001-000002 /b\nspk-0002-000001 /c\nspk-0003-000001 /d\n",
     "line 4: utterance 'spk-0003-000001' is not in utt2spk"),
    ("spk2utt", "spk-0001 spk-0001-000001\nspk-0002 spk-0002-000001\n",
     "utterances of speaker 'spk-0001' disagree"),
    ("spk2gender", "spk-0001 f\nspk-0002 x\n", "line 2: speaker 'spk-0002' has gender 'x'"),
    ("utt2dur", "spk-0001-000001 1\nspk-0001-000002 -1\nspk-0002-000001 1\n", "non-positive"),
    ("utt2dur", "spk-0001-000001 1\nspk-0001-000002 abc\nspk-0002-000001 1\n", "expected a float"),
    ("text", "spk-0001-000001 A\n\nspk-0002-000001 B\n", "line 2: empty line"),
])
def test_validator_names_file_and_problem(tmp_path: Path, name: str, content: str,
                                          needle: str) -> None:
    root = make_dir(tmp_path)
    _damage(root, name, content)
    with pytest.raises(InputError) as info:
        validate_data_dir(root)
    assert needle in str(info.value)
    assert str(info.value).startswith(str(root / name))


def test_missing_required_file(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    (root / "text").unlink()
    with pytest.raises(InputError, match="missing text"):
        validate_data_dir(root)
    validate_data_dir(root, require=())  # text is optional when not required
    with pytest.raises(InputError, match="missing ali.scp"):
        validate_data_dir(root, require=("ali.scp",))


def test_no_audio_and_not_a_dir(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    (root / "wav.scp").unlink()
    with pytest.raises(InputError, match="neither wav.scp nor feats.scp"):
        validate_data_dir(root)
    with pytest.raises(InputError, match="not a directory"):
        validate_data_dir(tmp_path / "nope")


def test_speakers_must_be_contiguous(tmp_path: Path) -> None:
    utt2spk = {"a-1": "s1", "b-1": "s2", "c-1": "s1"}
    write_table(tmp_path / "utt2spk", utt2spk)
    write_table(tmp_path / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    write_table(tmp_path / "wav.scp", {u: "/x" for u in utt2spk})
    with pytest.raises(InputError, match="line 3: utterances of speaker 's1' are not contiguous"):
        validate_data_dir(tmp_path, require=())


def test_partial_alignment_allowed_unless_required(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    write_table(root / "ali.scp", {"spk-0001-000001": "ali.ark:10"})
    validate_data_dir(root)
    with pytest.raises(InputError, match="2 utterance"):
        validate_data_dir(root, require=("ali.scp",))


def test_cmvn_keyed_by_speaker(tmp_path: Path) -> None:
    root = make_dir(tmp_path)
    write_table(root / "cmvn.scp", {"spk-0001": "c.ark:1"})
    with pytest.raises(InputError, match="speaker.*of spk2utt missing"):
        validate_data_dir(root)
