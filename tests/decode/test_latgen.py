"""The lattice generator (``decode/csrc/``) against Kaldi's own decoders on the mini
graph: the word sequences, their best costs and alignments against the raw lattice of
kaldi-decoder's LatticeSimpleDecoder (Kaldi's code), the best path against its
FasterDecoder."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
from hand_lattices import all_paths, words_of

from asrtrain.decode.latgen import LatticeDecoder, SearchOptions

LATTICE_BEAM = 5.0


def _alignments(lang: Path) -> dict[str, np.ndarray]:
    import kaldiio

    return {u: np.asarray(a) for u, a in kaldiio.load_scp_sequential(str(lang / "pdf_ali" / "dev.scp"))}


def _scores(pdfs: np.ndarray, num_pdfs: int, rng: np.random.Generator, noise: float,
            peak: float) -> np.ndarray:
    """Noisy scores around an alignment: several word sequences stay close."""
    return (rng.normal(0, noise, (pdfs.size, num_pdfs)) + peak * np.eye(num_pdfs)[pdfs]).astype(np.float32)


def _kaldi_word_sequences(raw_text: str) -> dict[tuple[int, ...], tuple[float, tuple[int, ...]]]:
    """Word sequence → (best cost, its input labels) over every path of a raw state-level
    lattice in OpenFst text form (``src dst ilabel olabel graph,acoustic``)."""
    arcs: dict[int, list[tuple[int, int, int, float]]] = {}
    finals: dict[int, float] = {}
    for line in raw_text.splitlines():
        p = line.split()
        if len(p) >= 4:
            cost = sum(float(x) for x in p[4].split(",")) if len(p) > 4 else 0.0
            arcs.setdefault(int(p[0]), []).append((int(p[1]), int(p[2]), int(p[3]), cost))
        elif p:
            finals[int(p[0])] = sum(float(x) for x in p[1].split(",")) if len(p) > 1 else 0.0

    @functools.lru_cache(None)
    def suffix(s: int) -> dict:
        out: dict = {(): (finals[s], ())} if s in finals else {}
        for d, il, ol, cost in arcs.get(s, []):
            for ws, (c, ils) in suffix(d).items():
                key = ((ol,) if ol else ()) + ws
                cand = (c + cost, ((il,) if il else ()) + ils)
                if key not in out or cand[0] < out[key][0]:
                    out[key] = cand
        return out

    return suffix(int(raw_text.split()[0]))  # the start state is printed first


def _ours(lat, acwt: float) -> dict[tuple[int, ...], tuple[float, tuple[int, ...]]]:
    out: dict = {}
    for arcs, end in all_paths(lat):
        ws = words_of(lat, arcs)
        assert ws not in out, f"word sequence {ws} twice: the lattice is not determinized"
        cost = float(lat.final_graph[end]) + acwt * float(lat.final_acoustic[end])
        cost += sum(float(lat.graph[a]) + acwt * float(lat.acoustic[a]) for a in arcs)
        labels = [int(x) for a in arcs for x in lat.arc_string(a)]
        out[ws] = (cost, tuple(labels + lat.final_string(end).tolist()))
    return out


def _arc_best_costs(lat, acwt: float) -> np.ndarray:
    """Cost of the best complete path through each arc."""
    cost = lat.graph.astype(np.float64) + acwt * lat.acoustic
    fwd = np.full(lat.num_states, np.inf)
    fwd[0] = 0.0
    for a in np.argsort(lat.src, kind="stable"):
        fwd[lat.dst[a]] = min(fwd[lat.dst[a]], fwd[lat.src[a]] + cost[a])
    bwd = lat.final_graph + acwt * lat.final_acoustic.astype(np.float64)
    for a in np.argsort(-lat.src, kind="stable"):
        bwd[lat.src[a]] = min(bwd[lat.src[a]], cost[a] + bwd[lat.dst[a]])
    return fwd[lat.src] + cost + bwd[lat.dst]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_word_sequences_costs_and_alignments_equal_kaldis(mini_lang_dec, seed):
    import kaldi_decoder
    import kaldifst

    hclg = mini_lang_dec / "graph" / "HCLG.fst"
    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    cfg = kaldi_decoder.LatticeSimpleDecoderConfig()
    cfg.beam, cfg.lattice_beam = 30.0, LATTICE_BEAM
    fst = kaldifst.StdConstFst.read(str(hclg))
    kaldi = kaldi_decoder.LatticeSimpleDecoder(fst, cfg)
    ours = LatticeDecoder(hclg, SearchOptions(beam=30.0, max_active=10**9, min_active=0,
                                              lattice_beam=LATTICE_BEAM))
    rng = np.random.default_rng(seed)
    alternatives = 0
    for utt, pdfs in list(_alignments(mini_lang_dec).items())[:4]:
        scores = _scores(pdfs, num_pdfs, rng, noise=2.5, peak=1.0)
        kaldi.decode(kaldi_decoder.DecodableCtc(np.ascontiguousarray(scores)))
        ok, raw = kaldi.get_raw_lattice()
        assert ok
        ref = _kaldi_word_sequences(raw.to_str())
        best = min(c for c, _ in ref.values())
        lat, stats = ours.decode(scores, 1.0, ours.columns(num_pdfs), utt)
        lat.check()
        got = _ours(lat, 1.0)
        within = {ws for ws, (c, _) in ref.items() if c < best + LATTICE_BEAM - 1e-3}
        assert within <= set(got), f"{utt}: word sequences within the beam missing"
        for ws, (cost, labels) in got.items():  # each with its best alignment and cost
            assert ws in ref
            assert cost == pytest.approx(ref[ws][0], abs=1e-3)
            assert labels == ref[ws][1]
        # pruned as Kaldi prunes lattices: every arc on some path within the beam
        assert (_arc_best_costs(lat, 1.0) <= best + LATTICE_BEAM + 1e-3).all()
        assert lat.num_frames == pdfs.size and stats.reached_final
        alternatives += len(got)
    assert alternatives > 20  # the scores left real alternatives to keep


@pytest.mark.parametrize("max_active", [7000, 40])
def test_best_path_at_the_search_scale_is_faster_decoders(mini_lang_dec, max_active):
    import kaldi_decoder
    import kaldifst

    hclg = mini_lang_dec / "graph" / "HCLG.fst"
    num_pdfs = int((mini_lang_dec / "num_pdfs").read_text())
    fst = kaldifst.StdConstFst.read(str(hclg))
    faster = kaldi_decoder.FasterDecoder(
        fst, kaldi_decoder.FasterDecoderOptions(beam=13.0, max_active=max_active))
    ours = LatticeDecoder(hclg, SearchOptions(beam=13.0, max_active=max_active))
    rng = np.random.default_rng(0)
    acwt = 0.1
    for utt, pdfs in _alignments(mini_lang_dec).items():
        scores = _scores(pdfs, num_pdfs, rng, noise=8.0, peak=12.0)
        faster.decode(kaldi_decoder.DecodableCtc(np.ascontiguousarray(scores * acwt)))
        ok, path = faster.get_best_path()
        lat, _ = ours.decode(scores, acwt, ours.columns(num_pdfs), utt)
        best = lat.best_path(1.0 / acwt)
        assert best is not None and ok
        assert best.words == list(kaldifst.get_linear_symbol_sequence(path)[2]), utt
        assert len(best.pdfs) == pdfs.size


def test_scores_that_miss_graph_labels_are_refused(mini_lang_dec):
    from asrtrain.core.errors import InputError

    ours = LatticeDecoder(mini_lang_dec / "graph" / "HCLG.fst", SearchOptions())
    with pytest.raises(InputError, match="input label"):
        ours.columns(3)
    cols = ours.columns(int((mini_lang_dec / "num_pdfs").read_text()))
    with pytest.raises(InputError, match="utt1: scores of shape"):
        ours.decode(np.zeros((5, 3), np.float32), 0.1, cols, "utt1")


def test_build_failures_are_one_line_and_leave_nothing(tmp_path, monkeypatch):
    from asrtrain.core.errors import ConfigError
    from asrtrain.decode import native

    src = tmp_path / "latgen.cpp"
    src.write_text("this is not C++\n")
    monkeypatch.setattr(native, "SOURCE", src)
    with pytest.raises(ConfigError, match="building .*latgen.cpp failed"):
        native.build(force=True)
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-g++"))
    with pytest.raises(ConfigError, match="is not a program"):
        native.build(force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latgen.cpp"]
