"""Text sources and cleaning: the zText and dictd readers, the sentence filters, atomic fetch."""

from __future__ import annotations

import gzip
import shutil
import struct
import zlib
from pathlib import Path

import pytest

from asrtrain.core.errors import AsrtrainError
from asrtrain.synth import text
from asrtrain.synth.text import (
    CleanStats,
    bible_paragraphs,
    clean,
    clean_sentence,
    devil_paragraphs,
    fortune_paragraphs,
    split_sentences,
)


def test_clean_sentence_keeps_words_and_pauses() -> None:
    s, why = clean_sentence("“Have you no answer?” said the high-priest, to him.")
    assert why == ""
    assert s.words == ("HAVE", "YOU", "NO", "ANSWER", "SAID", "THE", "HIGH", "PRIEST", "TO", "HIM")
    assert s.spoken == "have you no answer said the high priest, to him."
    q, _ = clean_sentence("Is it Uriah’s wife, or not?")
    assert q.words[2] == "URIAH'S" and q.spoken.endswith("not?")


@pytest.mark.parametrize("raw,reason", [
    ("He had 12 sons and daughters.", "digits"),
    ("Send mail to root@host at once.", "symbols"),
    ("The café is open every day.", "non-ascii"),
    ("Too short here.", "length"),
    (" ".join(["word"] * 31) + ".", "length"),
    ("He said don''t go there now.", "tokens"),
])
def test_clean_sentence_rejects(raw: str, reason: str) -> None:
    s, why = clean_sentence(raw)
    assert s is None and why == reason


def test_split_and_dedupe_count_what_was_dropped() -> None:
    stats, seen = CleanStats(), set()
    paragraphs = ["One two three four. One two three four! He has 3 cats.",
                  "A fine day, is it not?  Short one."]
    out = clean(paragraphs, "x", stats, seen)
    assert [s.spoken for s in out] == ["one two three four.", "a fine day, is it not?"]
    assert stats.kept["x"] == 2
    assert stats.dropped == {"duplicate": 1, "digits": 1, "length": 1}
    assert split_sentences("He said \"go.\" Then he left.") == ['He said "go."', "Then he left."]


def _write_ztext(module: Path, verses: list[str]) -> None:
    """A two-block zText testament: .bzs (offset, size, raw), .bzv (block, start, len)."""
    module.mkdir(parents=True)
    blocks = [verses[:2], verses[2:]]
    bzz, bzs, bzv = b"", b"", struct.pack("<IIH", 0, 0, 0)
    for number, block in enumerate(blocks):
        raw = b""
        for verse in block:
            data = verse.encode()
            bzv += struct.pack("<IIH", number, len(raw), len(data))
            raw += data
        packed = zlib.compress(raw)
        bzs += struct.pack("<III", len(bzz), len(packed), len(raw))
        bzz += packed
    for testament in ("ot", "nt"):
        (module / f"{testament}.bzs").write_bytes(bzs)
        (module / f"{testament}.bzv").write_bytes(bzv)
        (module / f"{testament}.bzz").write_bytes(bzz)


def test_ztext_reader_strips_osis_markup(tmp_path: Path) -> None:
    module = tmp_path / "tree/usr/share/sword/modules/texts/ztext/web"
    _write_ztext(module, [
        '<title type="main">Genesis</title><w lemma="x">In</w> the beginning God',
        'created the heavens.<note placement="foot">Or, sky</note> And it was good.',
        "<chapter/>Second block here,", "and more words.",
    ])
    books = list(bible_paragraphs(tmp_path))
    assert books[0] == "In the beginning God created the heavens. And it was good."
    assert books[1] == "Second block here, and more words."
    assert len(books) == 4  # ot and nt


def test_fortune_and_devil_readers(tmp_path: Path) -> None:
    fortunes = tmp_path / "tree/usr/share/games/fortunes"
    fortunes.mkdir(parents=True)
    (fortunes / "wisdom").write_text("A first fortune\nover two lines.\n%\nSecond one.\n"
                                     "\t\t-- Somebody Famous\n%\n")
    (fortunes / "wisdom.dat").write_bytes(b"\0binary")
    assert list(fortune_paragraphs(tmp_path)) == ["A first fortune over two lines.",
                                                  "Second one.", ""]
    dictd = tmp_path / "tree/usr/share/dictd"
    dictd.mkdir(parents=True)
    body = b"00-database-short\nDevil\nABATIS, n.  Rubbish in front\nof a fort.\n\n"
    start = body.index(b"ABATIS")
    with gzip.open(dictd / "devil.dict.dz", "wb") as fh:
        fh.write(body)
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    (dictd / "devil.index").write_text(f"00databaseshort\tA\tR\nabatis\t{b64[start]}\t"
                                       f"{b64[len(body) - start]}\n")
    assert list(devil_paragraphs(tmp_path)) == ["Rubbish in front of a fort."]


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian/Ubuntu)")
def test_failed_fetch_leaves_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(text.SOURCES, "nothing", ("asrtrain-no-such-package-xyz",))
    with pytest.raises(AsrtrainError, match="fetching text source 'nothing' failed"):
        text.fetch_packages("nothing", tmp_path)
    assert not (tmp_path / "debian" / "nothing").exists()
    assert [p.name for p in (tmp_path / "debian").iterdir()] == []


def test_unknown_source(tmp_path: Path) -> None:
    with pytest.raises(AsrtrainError, match="unknown text source 'koran'"):
        text.load_sentences(("koran",), tmp_path)
