"""``asrtrain decode --lattices``: Kaldi lattice archives per job, and every setting's hyps
from the lattices equal to the one-best decoder's (oracle scores on the mini graph)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.decode.decoder import DecodeConfig, decode
from asrtrain.decode.lattice_job import lattice_archive, read_lattices


def _config(lang, corpus, out, **kw) -> DecodeConfig:
    return DecodeConfig(graph=lang / "graph", out=out, oracle=lang / "pdf_ali" / "dev.scp",
                        text=corpus / "dev" / "text", lmwts=[8.0, 12.0], wips=[0.0, 0.5], **kw)


def test_lattices_give_the_one_best_hyps_of_every_setting(mini_lang_dec, mini_corpus_dec,
                                                          tmp_path, monkeypatch):
    from asrtrain.decode import decoder

    monkeypatch.setattr(decoder, "SPAWN_MIN_FRAMES", 0)  # two spawned lattice jobs
    one = _config(mini_lang_dec, mini_corpus_dec, tmp_path / "one", nj=1)
    decode(one)
    lat = _config(mini_lang_dec, mini_corpus_dec, tmp_path / "lat", nj=2, lattices=True)
    figures = decode(lat)
    hyps = (one.out / "hyp" / "8_0.0.txt").read_text().splitlines()
    utts = [ln.split()[0] for ln in hyps]
    assert all(lattice_archive(lat.out, j).exists() for j in range(2))
    lattices = list(read_lattices(lat.out, 2))
    assert [k for k, _ in lattices] == utts  # in the one-best decoder's order
    for _, lattice in lattices:
        lattice.check()
    for name in ("8_0.0", "8_0.5", "12_0.0", "12_0.5"):
        ours = (lat.out / "hyp" / f"{name}.txt").read_text()
        assert ours == (one.out / "hyp" / f"{name}.txt").read_text(), name
        assert (lat.out / "ctm" / f"{name}.ctm").read_text()
    stats = json.loads((lat.out / "decode_stats.json").read_text())
    assert stats == figures and stats["utterances"] == len(utts) and not stats["failed"]
    assert stats["rtf_decode_total"] > 0 and stats["lattice_arcs_per_frame"] > 0
    assert (lat.out / "ref.txt").exists()


def test_cli_lattice_options(mini_lang_dec, mini_corpus_dec, tmp_path):
    out = tmp_path / "dec"
    (out / "lat").mkdir(parents=True)
    (out / "lat" / "lat.1.gz").write_bytes(b"an earlier decode's")
    oracle = ["--oracle", str(mini_lang_dec / "pdf_ali" / "dev.scp"), "--lmwt", "10"]
    res = CliRunner().invoke(cli, ["decode", "-", str(mini_lang_dec / "graph"), "-", str(out),
                                   "--nj", "1", *oracle, "--lattices", "--lattice-beam", "6"])
    assert res.exit_code == 0, res.output
    assert "for the lattices and the sweep" in res.output
    assert (out / "lat" / "lat.0.gz").exists() and (out / "hyp" / "10.txt").exists()
    assert not (out / "lat" / "lat.1.gz").exists()  # rescore would read it as job 1
    res = CliRunner().invoke(cli, ["decode", "-", str(mini_lang_dec / "graph"), "-", str(out),
                                   "--nj", "1", *oracle])
    assert res.exit_code == 0, res.output
    assert not list((out / "lat").iterdir())  # one-best hyps now: no lattices to mismatch
    res = CliRunner().invoke(cli, ["decode", "-", str(mini_lang_dec / "graph"), "-", str(out),
                                   "--oracle", str(mini_lang_dec / "pdf_ali" / "dev.scp"),
                                   "--lattices", "--lattice-beam", "0"])
    assert res.exit_code == 2 and "--lattice-beam" in res.output


def test_kaldi_graph_lattices_equal_ours_relabelled(mini_lang_dec, mini_corpus_dec, tmp_path):
    """On a transition-id copy of HCLG (``--tid2pdf``, a VectorFst) the lattices are ours
    with each pdf+1 label turned into its transition-id: same words, costs and frames."""
    import numpy as np

    from asrtrain.decode.kaldi_style import write_kaldi_graph, write_tid2pdf

    graph = tmp_path / "kgraph"
    tid2pdf = write_kaldi_graph(mini_lang_dec, graph, "vector")
    tmap = write_tid2pdf(tmp_path / "tid2pdf", mini_lang_dec, tid2pdf, with_phones=True)
    ours = _config(mini_lang_dec, mini_corpus_dec, tmp_path / "ours", nj=1, lattices=True)
    decode(ours)
    kaldi = DecodeConfig(graph=graph, out=tmp_path / "kaldi", oracle=ours.oracle, nj=1,
                         lmwts=ours.lmwts, wips=ours.wips, lattices=True, tid2pdf=tmap)
    decode(kaldi)
    for (k1, a), (k2, b) in zip(read_lattices(ours.out, 1), read_lattices(kaldi.out, 1),
                                strict=True):
        assert k1 == k2
        for f in ("src", "dst", "word", "graph", "acoustic", "ilabel_offsets", "final_offsets"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), (k1, f)
        assert np.array_equal(a.ilabels, tid2pdf[b.ilabels] + 1)
    for name in ("8_0.0", "12_0.5"):
        assert ((kaldi.out / "hyp" / f"{name}.txt").read_text()
                == (ours.out / "hyp" / f"{name}.txt").read_text())
