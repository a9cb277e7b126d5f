"""``prepare align`` on bad input: one line naming the file and the problem, counts, lists."""

from __future__ import annotations

import shutil
from pathlib import Path


def copy_data(src: Path, dst: Path) -> Path:
    """A data dir's tables copied (the feature arks stay: scp paths are absolute)."""
    dst.mkdir(parents=True)
    for f in src.iterdir():
        if f.is_file():
            shutil.copy(f, dst / f.name)
    return dst

QUICK = ["--stages", "mono", "--mono-iters", "2", "--mono-gauss", "60"]


def _rewrite_text(data: Path, edit) -> None:
    lines = (data / "text").read_text().splitlines()
    (data / "text").write_text("".join(f"{ln}\n" for ln in edit(lines)))


def test_words_missing_from_the_lexicon_are_listed_with_counts(tiny_corpus, tiny_mfcc, tmp_path,
                                                               run_cli, one_error) -> None:
    data = copy_data(tiny_mfcc / "train", tmp_path / "train")
    _rewrite_text(data, lambda ls: [ls[0] + " ZZQX ZZQX QQWY"] + ls[1:])
    proc = run_cli("prepare", "align", tiny_corpus / "dict", data, tmp_path / "ali", *QUICK)
    one_error(proc.stderr, 1, proc.returncode, str(data / "text"), "ZZQX (2)", "QQWY (1)",
               "--oov")
    assert not (tmp_path / "ali" / "train" / "ali.scp").exists()


def test_oov_maps_the_words_and_says_how_many(tiny_corpus, tiny_mfcc, tmp_path, run_cli) -> None:
    data = copy_data(tiny_mfcc / "train", tmp_path / "train")
    _rewrite_text(data, lambda ls: [ls[0] + " ZZQX"] + ls[1:])
    word = (tiny_corpus / "dict" / "lexicon.txt").read_text().split()[0]
    proc = run_cli("prepare", "align", tiny_corpus / "dict", data, tmp_path / "ali", *QUICK,
                   "--oov", word, "--max-lost", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"1 tokens of 1 words not in the lexicon mapped to {word}: ZZQX (1)" in proc.stderr
    proc = run_cli("prepare", "align", tiny_corpus / "dict", data, tmp_path / "ali2", *QUICK,
                   "--oov", "NOT-A-WORD")
    assert proc.returncode == 1 and "--oov 'NOT-A-WORD' is not a word of the lexicon" in proc.stderr


def test_empty_transcripts_are_listed_and_too_many_lost_is_an_error(tiny_corpus, tiny_mfcc,
                                                                      tmp_path, run_cli, one_error) -> None:
    data = copy_data(tiny_mfcc / "train", tmp_path / "train")
    first = (data / "text").read_text().split()[0]
    _rewrite_text(data, lambda ls: [first] + ls[1:])
    out = tmp_path / "ali"
    proc = run_cli("prepare", "align", tiny_corpus / "dict", data, out, *QUICK, "--max-lost", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{first} empty transcript" in (out / "train" / "failed.txt").read_text()
    assert "empty transcript: 1" in proc.stderr
    proc = run_cli("prepare", "align", tiny_corpus / "dict", data, tmp_path / "strict", *QUICK,
                   "--max-lost", "0")
    line = one_error(proc.stderr, 1, proc.returncode, "could not be aligned", "failed.txt")
    assert "1 of" in line
    assert not (tmp_path / "strict" / "train" / "ali.scp").exists()
    assert first in (tmp_path / "strict" / "train" / "failed.txt").read_text()


def test_a_duplicate_lexicon_line_is_named_with_both_lines(tiny_corpus, tiny_mfcc, tmp_path,
                                                             run_cli, one_error) -> None:
    dict_dir = tmp_path / "dict"
    shutil.copytree(tiny_corpus / "dict", dict_dir)
    lines = (dict_dir / "lexicon.txt").read_text().splitlines()
    (dict_dir / "lexicon.txt").write_text("\n".join([lines[0], "", *lines[1:], lines[0]]) + "\n")
    proc = run_cli("prepare", "align", dict_dir, tiny_mfcc / "train", tmp_path / "ali", *QUICK)
    line = one_error(proc.stderr, 1, proc.returncode, str(dict_dir / "lexicon.txt"))
    assert f"line {len(lines) + 2}: {lines[0].strip()!r} repeats line 1" in line, line
    assert not (tmp_path / "ali" / "train").exists()


def test_an_output_path_kaldiio_cannot_write_is_refused_before_anything_is_written(
        tiny_corpus, tiny_mfcc, tmp_path, run_cli, one_error) -> None:
    out = tmp_path / "a,b"
    proc = run_cli("prepare", "align", tiny_corpus / "dict", tiny_mfcc / "train", out, *QUICK)
    one_error(proc.stderr, 1, proc.returncode, "cannot hold Kaldi tables", "a,b")
    assert not out.exists() and not (tmp_path / "a").exists()


def test_audio_too_short_for_its_phones_is_counted_and_listed(tiny_corpus, tiny_mfcc, tmp_path,
                                                             run_cli) -> None:
    import kaldiio

    data = copy_data(tiny_mfcc / "train", tmp_path / "train")
    lines = (data / "feats.scp").read_text().splitlines()
    utt, spec = lines[1].split(maxsplit=1)
    short = tmp_path / "short.ark"
    kaldiio.save_ark(str(short), {utt: kaldiio.load_mat(spec)[:5]})   # 5 frames for a sentence
    lines[1] = f"{utt} {short}:{len(utt) + 1}"
    (data / "feats.scp").write_text("\n".join(lines) + "\n")
    out = tmp_path / "ali"
    proc = run_cli("prepare", "align", tiny_corpus / "dict", data, out, *QUICK, "--max-lost", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"{utt} too short for its phones" in (out / "train" / "failed.txt").read_text()
    assert "too short for its phones: 1" in proc.stderr


def test_a_training_copy_named_as_another_split_is_refused(tiny_corpus, tiny_mfcc, tmp_path,
                                                          run_cli) -> None:
    """``--extra`` shares the splits' names (alignment dirs, fmllr/<name>): a name taken by train
    or by a --split is refused before anything is written."""
    for clash in (["--extra", f"train={tiny_mfcc / 'dev'}"],
                  ["--split", f"dev={tiny_mfcc / 'dev'}", "--extra", f"dev={tiny_mfcc / 'test'}"]):
        proc = run_cli("prepare", "align", tiny_corpus / "dict", tiny_mfcc / "train",
                       tmp_path / "ali", *QUICK, *clash)
        assert proc.returncode == 2 and "'--extra'" in proc.stderr, proc.stderr
        assert not (tmp_path / "ali").exists()
