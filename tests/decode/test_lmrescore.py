"""``asrtrain rescore``: a lattice directory rescored with another LM into a decode
directory that ``score --sweep`` reads; bad input in one line."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from hand_lattices import NgramStore, random_lattice

from asrtrain.cli.main import cli
from asrtrain.decode.lattice_io import read_archive, write_archive
from asrtrain.decode.lattice_job import lattice_archive
from asrtrain.decode.lattice_sweep import best_paths
from asrtrain.lang.lexicon import read_symbols
from asrtrain.lang.lm import estimate, write_arpa

GRID = ["--lmwt", "4,8", "--wip", "0.0,1.0"]


@pytest.fixture(scope="module")
def setup(mini_lang_dec, tmp_path_factory):
    """Two jobs' archives of hand-built lattices over the mini graph's words, and two LMs
    (ARPA files) over its words.txt."""
    root = tmp_path_factory.mktemp("lmrescore")
    graph = mini_lang_dec / "graph"
    ids = read_symbols(graph / "words.txt")
    vocab = sorted(w for w in ids if not w.startswith(("#", "<")))
    rng = np.random.default_rng(0)
    latdir = root / "dec"
    refs = []
    for job in range(2):
        lats = []
        for i in range(3):
            lat = random_lattice(rng, states=7, extra_arcs=9, vocab=len(vocab))
            lat.word[:] = np.where(lat.word > 0, np.asarray([ids[w] for w in vocab])[lat.word - 1], 0)
            lats.append((f"utt{job}{i}", lat))
            refs.append(f"utt{job}{i} {' '.join(vocab[:3])}")
        write_archive(lattice_archive(latdir, job), lats)
    (latdir / "ref.txt").write_text("\n".join(refs) + "\n")
    lms = {}
    for name, seed, order in (("small", 1, 2), ("full", 2, 3)):
        r = np.random.default_rng(seed)
        text = [[vocab[i] for i in r.integers(0, len(vocab), size=r.integers(1, 6))]
                for _ in range(200)]
        lm = estimate(text, order=order, vocab=vocab)
        write_arpa(root / f"{name}.arpa", lm)
        lms[name] = (root / f"{name}.arpa", NgramStore(lm, {i: w for w, i in ids.items()}))
    return graph, latdir, lms, root


def _run(*args):
    return CliRunner().invoke(cli, ["rescore", *[str(a) for a in args]])


def test_rescored_lattices_and_hyps_per_setting(setup):
    graph, latdir, lms, root = setup
    out = root / "resc"
    res = _run(lms["small"][0], lms["full"][0], graph, latdir, out, *GRID)
    assert res.exit_code == 0, res.output
    assert "6 lattices rescored" in res.output
    assert sorted(p.stem for p in (out / "hyp").iterdir()) == ["4_0.0", "4_1.0", "8_0.0", "8_1.0"]
    assert (out / "ref.txt").read_text() == (latdir / "ref.txt").read_text()
    words = {i: w for w, i in read_symbols(graph / "words.txt").items()}
    hyps = (out / "hyp" / "8_1.0.txt").read_text().splitlines()
    got = [(u, lat) for j in range(2) for u, lat in read_archive(lattice_archive(out, j))]
    assert [u for u, _ in got] == [h.split()[0] for h in hyps]
    for (u, lat), line in zip(got, hyps, strict=True):
        path = best_paths(lat, [(8.0, 1.0)])[0]
        assert line.split() == [u] + [words[w] for w in path.words]
    # the written lattices carry the swapped LM costs: the best path's cost by brute force
    old, new = lms["small"][1], lms["full"][1]
    src = [lat for j in range(2) for _, lat in read_archive(lattice_archive(latdir, j))]
    for before, (_, after) in zip(src, got, strict=True):
        b = best_paths(before, [(8.0, 0.0)])[0]
        a = best_paths(after, [(8.0, 0.0)])[0]
        swapped = b.cost - old.sequence_cost(tuple(b.words)) + new.sequence_cost(tuple(b.words))
        assert a.cost <= swapped + 1e-3  # the old best, rescored, or something better
    res = CliRunner().invoke(cli, ["score", "--sweep", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "best_wer").read_text().startswith("%WER")


def test_the_same_lm_gives_the_first_pass_hyps(setup):
    graph, latdir, lms, root = setup
    out = root / "same"
    res = _run(lms["small"][0], lms["small"][0], graph, latdir, out, *GRID)
    assert res.exit_code == 0, res.output
    first = root / "first"
    from asrtrain.decode.graph_dir import GraphInfo
    from asrtrain.decode.lattice_sweep import write_sweep

    g = GraphInfo.load(graph)
    lats = [x for j in range(2) for x in read_archive(lattice_archive(latdir, j))]
    write_sweep(lats, g, g.pdf_info, [4.0, 8.0], [0.0, 1.0], first)
    for name in ("4_0.0", "8_1.0"):
        assert (out / "hyp" / f"{name}.txt").read_text() == (first / "hyp" / f"{name}.txt").read_text()
        assert (out / "ctm" / f"{name}.ctm").read_text() == (first / "ctm" / f"{name}.ctm").read_text()
    # a lang dir as both LMs: an unpruned one's first-pass LM is its full LM (lm_full/)
    lang = graph.parent
    res = _run(lang, lang, graph, latdir, root / "lang", *GRID)
    assert res.exit_code == 0, res.output
    for name in ("4_0.0", "8_1.0"):
        assert (root / "lang" / "hyp" / f"{name}.txt").read_text() == \
            (first / "hyp" / f"{name}.txt").read_text()


def test_bad_input_is_one_line(setup, tmp_path):
    graph, latdir, lms, _ = setup
    arpa = lms["small"][0]
    res = _run(arpa, arpa, graph, tmp_path, tmp_path / "o")
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        f"Error: {tmp_path}: no lattices (lat/lat.0.gz): decode with --lattices first"]
    bad = tmp_path / "bad.arpa"
    bad.write_text("\\data\\\nngram 1=2\n\n\\1-grams:\n-1.0\tA\n\n\\end\\\n")
    res = _run(bad, arpa, graph, latdir, tmp_path / "o2")
    assert res.exit_code == 1 and len(res.output.strip().splitlines()) == 1
    assert str(bad) in res.output
    assert not (tmp_path / "o2" / "lat").exists()
    # a lang dir of another lexicon
    other = tmp_path / "otherlang"
    (other / "lm_full").mkdir(parents=True)
    (other / "words.txt").write_text("<eps> 0\nA 1\n")
    res = _run(other, arpa, graph, latdir, tmp_path / "o4")
    assert res.exit_code == 1 and "words.txt differs from the graph's" in res.output
    # a missing job archive in the middle
    (tmp_path / "gap" / "lat").mkdir(parents=True)
    for j in (0, 2):
        lattice_archive(tmp_path / "gap", j).write_bytes(lattice_archive(latdir, 0).read_bytes())
    res = _run(arpa, arpa, graph, tmp_path / "gap", tmp_path / "o3")
    assert res.exit_code == 1 and "a job's archive is missing" in res.output


def test_text_reference_counts_only_utterances_without_lattices(setup, caplog):
    """``--text``: a reference utterance is missing only when no lattice was rescored for it
    (every one was once reported missing, the rescored set never being passed on)."""
    import logging

    graph, latdir, lms, root = setup
    text = root / "text_ref"
    text.write_text((latdir / "ref.txt").read_text() + "uttX ONLY REF\n")
    with caplog.at_level(logging.WARNING, logger="asrtrain"):
        res = _run(lms["small"][0], lms["small"][0], graph, latdir, root / "withtext", *GRID,
                   "--text", text)
    assert res.exit_code == 0, res.output
    missing = [r.getMessage() for r in caplog.records if "not in the archive" in r.getMessage()]
    assert len(missing) == 1 and missing[0].startswith("1 utterances") and "uttX" in missing[0]
