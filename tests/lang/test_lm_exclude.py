"""``prepare lang --exclude-text``: a dev set held out of train leaves the LM text too.

The LM text of a user's corpus is often every training transcript, dev's among them once
the recipe holds dev speakers out; an LM that read dev's sentences makes dev pick an LM
weight that test (whose sentences it never read) pays for. Leaving them out must give
exactly the LM of the text without them, one copy per utterance.
"""

from __future__ import annotations

import json

from asrtrain.lang.prepare import prepare_lang


def _with_dev_lines(mini_corpus, tmp_path):
    """The mini corpus's LM text with dev's five transcripts appended (one, A DOG, is also a line of its own)."""
    dev = [ln.split(maxsplit=1)[1] for ln in (mini_corpus / "dev" / "text").read_text().splitlines() if ln.strip()]
    text = tmp_path / "lm_text_with_dev"
    text.write_text((mini_corpus / "lm_text").read_text() + "".join(s + "\n" for s in dev))
    return text, dev


def test_leaving_dev_out_gives_the_lm_of_the_text_without_it(run_cli, mini_corpus, tmp_path):
    text, dev = _with_dev_lines(mini_corpus, tmp_path)
    plain = tmp_path / "plain"
    prepare_lang(mini_corpus / "dict", mini_corpus / "lm_text", mini_corpus, plain, order=3, num_pdfs=40,
                 min_count="1,1,2,2")  # the command's default
    out = tmp_path / "excluded"
    res = run_cli("prepare", "lang", mini_corpus / "dict", text, mini_corpus, out, "--order", "3",
                  "--num-pdfs", "40", "--exclude-text", mini_corpus / "dev" / "text")
    assert res.returncode == 0, res.stderr[-2000:]
    assert (out / "lm.arpa").read_text() == (plain / "lm.arpa").read_text()
    report = json.loads((out / "lm_report.json").read_text())
    lines = len((mini_corpus / "lm_text").read_text().split("\n")) - 1
    assert report["lm_text_lines"] == lines + len(dev) and report["lm_lines_left_out"] == len(dev)
    assert report["exclude_utterances"] == len(dev)
    # A DOG stays: another line of the text reads it (one copy per utterance is left out)
    assert report["dev_sentences_in_lm_text"] == 1 / len(dev)
    assert f"{len(dev)} lines left out" in res.stderr


def test_the_lang_dir_lists_the_words_its_lm_was_estimated_from(mini_corpus, tmp_path):
    """lm_words.txt (what ``score --lm-text LANG`` reads) is the text's words once dev's lines are
    out: a word only dev's transcripts hold is not listed, as the LM never read it."""
    text = tmp_path / "lm_text"
    text.write_text((mini_corpus / "lm_text").read_text() + "ZEBRA CAT\n")
    exclude = tmp_path / "dev_text"
    exclude.write_text("dev-1 REED AT A DOG\n")  # the text's one line with REED
    lexicon = {ln.split()[0] for ln in (mini_corpus / "dict" / "lexicon.txt").read_text().splitlines() if ln.strip()}
    words = {w for line in text.read_text().splitlines() for w in line.split()} & lexicon  # ZEBRA, THE: <UNK>
    out = tmp_path / "excluded"
    prepare_lang(mini_corpus / "dict", text, mini_corpus, out, order=2, num_pdfs=40, exclude_text=exclude)
    assert (out / "lm_words.txt").read_text() == "".join(f"{w}\n" for w in sorted(words - {"REED"}))
    kept = tmp_path / "kept"
    prepare_lang(mini_corpus / "dict", text, mini_corpus, kept, order=2, num_pdfs=40)
    assert set((kept / "lm_words.txt").read_text().split()) == words
    # an ARPA has no text: a list left from a former run in the same dir goes
    prepare_lang(mini_corpus / "dict", None, mini_corpus, kept, order=2, num_pdfs=40, arpa=out / "lm.arpa")
    assert not (kept / "lm_words.txt").exists()


def test_dev_lines_in_the_lm_text_lower_its_perplexity(mini_corpus, tmp_path):
    """Why the recipe leaves them out: with them, the dev perplexity is not the test's."""
    text, dev = _with_dev_lines(mini_corpus, tmp_path)
    kept = prepare_lang(mini_corpus / "dict", text, mini_corpus, tmp_path / "kept", order=3, num_pdfs=40)
    left = prepare_lang(mini_corpus / "dict", text, mini_corpus, tmp_path / "left", order=3, num_pdfs=40,
                        exclude_text=mini_corpus / "dev" / "text")
    assert kept["dev_perplexity"] < left["dev_perplexity"]
    assert json.loads((tmp_path / "kept" / "lm_report.json").read_text())["dev_sentences_in_lm_text"] == 1.0


def test_exclude_text_needs_an_lm_text(run_cli, one_error, mini_corpus, tmp_path):
    arpa = tmp_path / "lm.arpa"
    prepare_lang(mini_corpus / "dict", mini_corpus / "lm_text", mini_corpus, tmp_path / "l", order=2, num_pdfs=40)
    arpa.write_text((tmp_path / "l" / "lm.arpa").read_text())
    res = run_cli("prepare", "lang", mini_corpus / "dict", "-", mini_corpus, tmp_path / "out", "--arpa", arpa,
                  "--exclude-text", mini_corpus / "dev" / "text")
    one_error(res.stdout + res.stderr, 1, res.returncode, "--exclude-text", "--arpa")
    assert not (tmp_path / "out" / "graph").exists()
