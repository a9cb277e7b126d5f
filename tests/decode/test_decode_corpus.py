"""prepare lang and oracle decoding on the synthesized corpus (the tiny_corpus fixture)."""

from __future__ import annotations

import pytest

from asrtrain.decode.decoder import DecodeConfig, decode


def _wer(ref_path, hyp_path) -> tuple[int, int]:
    import kaldialign

    ref = dict((ln.split()[0], ln.split()[1:]) for ln in ref_path.read_text().splitlines())
    hyp = dict((ln.split()[0], ln.split()[1:]) for ln in hyp_path.read_text().splitlines())
    errors = sum(kaldialign.edit_distance(ref[u], hyp.get(u, []))["total"] for u in ref)
    return errors, sum(len(r) for r in ref.values())


@pytest.fixture(scope="module")
def tiny_lang(tiny_corpus, tmp_path_factory):
    from asrtrain.lang.prepare import prepare_lang

    out = tmp_path_factory.mktemp("tiny_lang") / "lang"
    figures = prepare_lang(tiny_corpus / "dict", tiny_corpus / "lm_text", tiny_corpus, out,
                           num_pdfs=300)
    return out, figures


def test_lang_on_the_corpus(tiny_lang, tiny_corpus):
    import kaldiio

    out, figures = tiny_lang
    assert figures["ngrams"][3] > 0 and figures["dev_perplexity"] > 10
    assert figures["sizes"]["HCLG"][1] > figures["sizes"]["HCLGa"][1]
    ali = kaldiio.load_scp(str(tiny_corpus / "dev" / "ali.scp"))
    pdf = kaldiio.load_scp(str(out / "pdf_ali" / "dev.scp"))
    assert {u: len(a) for u, a in ali.items()} == {u: len(p) for u, p in pdf.items()}


def test_oracle_wer_on_dev_is_at_most_one_percent(tiny_lang, tiny_corpus, tmp_path):
    out, _ = tiny_lang
    dec = tmp_path / "decode"
    figures = decode(DecodeConfig(graph=out / "graph", out=dec, oracle=out / "pdf_ali" / "dev.scp",
                                  nj=1, lmwts=[10.0], text=tiny_corpus / "dev" / "text"))
    errors, words = _wer(dec / "ref.txt", dec / "hyp" / "10.txt")
    assert words > 30
    assert errors / words <= 0.01
    assert figures["not_final"] == 0 and not figures["failed"] and figures["ref_oov_tokens"] == 0
