"""Every kind of text asrtrain reads: a byte that is not UTF-8 is one line naming the file, the line and
the byte offset; with ``--encoding`` (``ASRTRAIN_ENCODING``) the file is read in that encoding.

Each case calls the reader the commands call, on a file whose third line holds a Latin-1 ``é`` (0xE9).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from asrtrain.core.errors import InputError
from asrtrain.core.textio import ENCODING_ENV, read_lines, read_text

ASRTRAIN = Path(sys.executable).parent / "asrtrain"


def _write(path: Path, lines: list[str], bad_line: int = 3) -> Path:
    """``lines`` as Latin-1 bytes (line ``bad_line`` must hold an ``é``)."""
    assert "é" in lines[bad_line - 1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(ln + "\n" for ln in lines).encode("latin-1"))
    return path


def _offset(path: Path) -> int:
    return path.read_bytes().index(b"\xe9")


def _data_table(name: str) -> Callable[[Path], Any]:
    from asrtrain.data import kaldi_dir

    readers = {"text": kaldi_dir.read_text, "utt2spk": kaldi_dir.read_utt2spk, "spk2utt": kaldi_dir.read_spk2utt,
               "wav.scp": kaldi_dir.read_scp, "utt2uniq": kaldi_dir.read_table}
    return readers[name]


def _segments(path: Path) -> Any:
    from asrtrain.data.segments import read_segments

    return read_segments(path)


def _lexicon(path: Path) -> Any:
    from asrtrain.lang.lexicon import read_dict_dir

    d = path.parent
    (d / "silence_phones.txt").write_text("sil\n")
    (d / "nonsilence_phones.txt").write_text("a\nb\n")
    return read_dict_dir(d)


def _lm_text(path: Path) -> Any:
    from asrtrain.lang.prepare import read_sentences

    return read_sentences(path, False)


def _symbols(path: Path) -> Any:
    from asrtrain.lang.lexicon import read_symbols

    return read_symbols(path)


def _score(reader: str) -> Callable[[Path], Any]:
    from asrtrain.score import formats

    return getattr(formats, reader)  # type: ignore[no-any-return]


def _glm(path: Path) -> Any:
    from asrtrain.score.normalize import load_glm

    return load_glm(path)


def _config(path: Path) -> Any:
    from asrtrain.core.config import load_config

    return load_config(path)


def _scp(path: Path) -> Any:
    from asrtrain.data.kaldi_read import open_scp

    return dict(open_scp(path)._dict)


def _align_lexicon(path: Path) -> Any:
    from asrtrain.decode.ctm import read_align_lexicon

    return read_align_lexicon(path, {"sil": 1, "a": 2, "b": 3})


def _arpa(path: Path) -> Any:
    from asrtrain.lang.arpa import ArpaReader

    reader = ArpaReader(path, {"<s>": 1, "</s>": 2, "a": 3, "é": 4})
    return [list(chunk.__dict__.values()) for chunk in reader.read()], reader.stats.__dict__


ARPA = ["\\data\\", "ngram 1=4", "", "\\1-grams:", "-1.0 <s> -0.5", "-1.0 </s>", "-1.0 a -0.5", "-1.0 é -0.5",
        "", "\\end\\"]


# (name of the file, its lines, the reader); line 3 holds the byte
CASES: list[tuple[str, list[str], Callable[[Path], Any]]] = [
    ("data/text", ["u1 a b", "u2 b", "u3 café"], _data_table("text")),
    ("data/wav.scp", ["u1 /a.wav", "u2 /b.wav", "u3 /café.wav"], _data_table("wav.scp")),
    ("data/utt2spk", ["u1 s1", "u2 s1", "u3 sé"], _data_table("utt2spk")),
    ("data/spk2utt", ["s1 u1", "s2 u2", "sé u3"], _data_table("spk2utt")),
    ("data/utt2uniq", ["u1 u1", "u2 u2", "u3 ué"], _data_table("utt2uniq")),
    ("data/segments", ["u1 r1 0 1", "u2 r1 1 2", "u3 ré 2 3"], _segments),
    ("dict/lexicon.txt", ["a a", "b b", "é a b"], _lexicon),
    ("lm_text", ["a b", "b a", "a é"], _lm_text),
    ("lang/words.txt", ["<eps> 0", "a 1", "é 2"], _symbols),
    ("ref.txt", ["u1 a b", "u2 b", "u3 é"], _score("read_text")),
    ("ref.stm", ["f A s 0 1 a", "f A s 1 2 b", "f A s 2 3 é"], _score("read_stm")),
    ("hyp.ctm", ["f A 0 1 a", "f A 1 1 b", "f A 2 1 é"], _score("read_ctm")),
    ("hub5.glm", ["* name 'x'", ";; comment", "é => a / [ ] __ [ ]"], _glm),
    ("conf.yaml", ["batch: 8", "lr: 0.1", "exp: café"], _config),
    ("feats.scp", ["u1 a.ark:10", "u2 a.ark:20", "u3 é.ark:30"], _scp),
    ("graph/align_lexicon.txt", ["a a", "b b", "é a b"], _align_lexicon),
]


@pytest.fixture
def no_user_encoding(monkeypatch):
    monkeypatch.delenv(ENCODING_ENV, raising=False)


@pytest.mark.parametrize("name,lines,reader", CASES, ids=[c[0] for c in CASES])
def test_a_byte_that_is_not_utf8_names_file_line_and_offset(tmp_path, no_user_encoding, name, lines, reader):
    path = _write(tmp_path / name, lines)
    with pytest.raises(InputError) as err:
        reader(path)
    message = str(err.value)
    assert message.startswith(f"{path}: line 3: not UTF-8"), message
    assert f"byte 0xE9 at byte offset {_offset(path)}" in message
    assert "\n" not in message


@pytest.mark.parametrize("name,lines,reader", CASES, ids=[c[0] for c in CASES])
def test_with_the_encoding_given_it_reads(tmp_path, monkeypatch, name, lines, reader):
    monkeypatch.setenv(ENCODING_ENV, "latin-1")
    path = _write(tmp_path / name, lines)
    result = reader(path)
    assert "é" in repr(result).lower()  # decoded: the word is é, not a replacement character


def test_utf8_files_read_the_same_under_a_user_encoding(tmp_path, monkeypatch):
    """asrtrain's own outputs are UTF-8: naming Latin-1 for a user's files must not garble them."""
    path = tmp_path / "words.txt"
    path.write_text("café 1\nnaïve 2\n", encoding="utf-8")
    monkeypatch.setenv(ENCODING_ENV, "latin-1")
    assert read_lines(path) == ["café 1", "naïve 2"]


def test_a_byte_order_mark_and_crlf_are_read_as_text(tmp_path, no_user_encoding):
    path = tmp_path / "text"
    path.write_bytes(b"\xef\xbb\xbfu1 a\r\nu2 b\r\n")
    assert read_lines(path) == ["u1 a", "u2 b"]
    assert read_text(path) == "u1 a\nu2 b\n"


def test_an_unknown_encoding_is_a_usage_error(tmp_path):
    env = {**os.environ, ENCODING_ENV: "no-such-codec"}
    proc = subprocess.run([str(ASRTRAIN), "score", "--help"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown text encoding 'no-such-codec'" in proc.stderr


def test_score_refuses_latin1_and_reads_it_with_encoding(tmp_path):
    """The command a user runs: one line and exit 1; with --encoding the words are compared as text."""
    ref = _write(tmp_path / "ref.txt", ["u1 a b", "u2 b", "u3 café"])
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("u1 a b\nu2 b\nu3 café\n", encoding="utf-8")  # asrtrain's hypotheses are UTF-8
    env = {k: v for k, v in os.environ.items() if k != ENCODING_ENV}
    proc = subprocess.run([str(ASRTRAIN), "score", str(ref), str(hyp), str(tmp_path / "out")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    error = [ln for ln in proc.stderr.splitlines() if ln.startswith("Error:")]
    assert error == [f"Error: {ref}: line 3: not UTF-8 text (byte 0xE9 at byte offset {_offset(ref)}: "
                     "invalid continuation byte); convert it (iconv -f LATIN1 -t UTF-8) or name its encoding "
                     "(asrtrain --encoding latin-1 …)"], proc.stderr
    proc = subprocess.run([str(ASRTRAIN), "--encoding", "latin-1", "score", str(ref), str(hyp),
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "0.00" in proc.stdout  # café (Latin-1) and café (UTF-8) are the same word


def test_a_streamed_arpa_names_line_and_offset_and_reads_with_the_encoding(tmp_path, monkeypatch):
    """ARPA files are read a block at a time (gigabytes): the same rule, by block."""
    from asrtrain.lang import arpa

    monkeypatch.delenv(ENCODING_ENV, raising=False)
    monkeypatch.setattr(arpa, "BLOCK_BYTES", 16)  # the file read in many blocks: lines and offsets counted over them
    path = _write(tmp_path / "lm.arpa", ARPA, bad_line=8)
    with pytest.raises(InputError) as err:
        _arpa(path)
    assert str(err.value).startswith(f"{path}: line 8: not UTF-8 text (byte 0xE9 at byte offset {_offset(path)}")
    monkeypatch.setenv(ENCODING_ENV, "latin-1")
    _, stats = _arpa(path)
    assert stats["kept"] == [4] and not stats["oov_words"]  # é read as the vocabulary's é
