"""``prepare align``'s memory does not grow with the corpus beyond what one job holds:
the parent keeps frame counts and which utterances have words (each job reads its own
speakers' features and transcripts and builds their DAGs), a job keeps
its features in one float32 matrix and passes over them without copying them, and
fMLLR's working memory is bounded whatever the speaker's length or the model's size."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import kaldiio
import numpy as np
import pytest
import torch

from asrtrain.adapt import fmllr
from asrtrain.adapt import gmm as gmm_module
from asrtrain.adapt.gmm import CHUNK, CHUNK_BYTES, DiagGMM, chunk_rows
from asrtrain.align import am
from asrtrain.align.am import AcousticModel
from asrtrain.align.corpus import Corpus, accumulate, aligned_frames
from asrtrain.align.feats import DiskFeats, FrontEnd
from asrtrain.align.frames import FrameBlock
from asrtrain.align.front_stats import OUTER_ROWS, fmllr_stats, mllt_stats
from asrtrain.align.run import load_split
from asrtrain.align.transcripts import pron_table
from asrtrain.lang.lexicon import read_dict_dir


def _data_dir(root: Path, frames: dict[str, int], dim: int = 13) -> Path:
    """A data dir of random MFCC: utterance ``spkN-i`` of speaker ``spkN``, "yes no"."""
    data = root / "data"
    data.mkdir(parents=True)
    rng = np.random.default_rng(0)
    with kaldiio.WriteHelper(f"ark,scp:{data / 'feats.ark'},{data / 'feats.scp'}") as w:
        for utt, n in frames.items():
            w(utt, rng.standard_normal((n, dim)).astype(np.float32))
    (data / "text").write_text("".join(f"{u} YES NO\n" for u in frames))
    (data / "utt2spk").write_text("".join(f"{u} {u.split('-')[0]}\n" for u in frames))
    d = root / "dict"
    d.mkdir()
    for name, text in (("silence_phones.txt", "sil\n"), ("optional_silence.txt", "sil\n"),
                       ("nonsilence_phones.txt", "y\ne\nn\no\n"),
                       ("lexicon.txt", "YES y e\nNO n o\n")):
        (d / name).write_text(text)
    return data


def test_the_parent_holds_frame_counts_and_a_job_one_float32_matrix(tmp_path: Path) -> None:
    frames = {"spk1-1": 120, "spk1-2": 80, "spk2-1": 100}
    data = _data_dir(tmp_path, frames)
    lex = read_dict_dir(tmp_path / "dict")
    split = load_split("train", data, lex, pron_table(lex), None)
    assert isinstance(split.utts.feats, DiskFeats)          # what prepare align's parent keeps
    assert [split.utts.frames(u) for u in frames] == list(frames.values())
    with split.jobs(1, None) as jobs:                        # --nj 1: the job in this process
        jobs.use_front(FrontEnd(deltas=True))
        shard = jobs._local
        assert shard is not None
        block = shard.corpus.feats
        assert isinstance(block, FrameBlock)
        assert block.data.dtype == np.float32 and block.data.shape == (300, 39)
        assert np.shares_memory(block["spk2-1"], block.data)
        first = block.data
        jobs.use_front(FrontEnd(deltas=True))                 # a new front end: same matrix
        assert shard.corpus.feats.data is first


def test_the_alignments_stay_in_the_jobs_which_write_them(tmp_path: Path) -> None:
    """The parent sums counts (tree, topology, frames per pdf) and merges the jobs' tables."""
    from asrtrain.align.hmm import MonoPdfs
    from asrtrain.lang.hmm import states_per_phone
    from asrtrain.lang.pdf_ali import read_alignments

    frames = {"spk1-1": 120, "spk1-2": 80, "spk2-1": 100, "spk3-1": 5}   # the last too short
    data = _data_dir(tmp_path, frames)
    lex = read_dict_dir(tmp_path / "dict")
    split = load_split("train", data, lex, pron_table(lex), None)
    phones = sorted(lex.phones.values())
    with split.jobs(1, None) as jobs:
        assert jobs.equal_alignments(MonoPdfs(phones)) == ["spk3-1"]
        assert jobs.aligned == 3 and not hasattr(jobs, "alignments")
        topo = jobs.topology(states_per_phone(phones))
        assert sum(jobs.contexts(topo).values()) == 300
        assert int(jobs.pdf_frames(len(phones) * 3).sum()) == 300
        assert jobs.write_alignments(tmp_path / "out", "train", {i: p for p, i in lex.phones.items()},
                                     split.text, {"spk3-1": "too short"}) == 3
    alis = dict(read_alignments(tmp_path / "out" / "train" / "ali.scp"))
    assert list(alis) == ["spk1-1", "spk1-2", "spk2-1"] and len(alis["spk1-2"]) == 80
    assert sorted(p.name for p in (tmp_path / "out" / "train").iterdir()) == [
        "ali.1.ark", "ali.scp", "failed.txt", "pdf.1.ark", "pdf.scp", "phone.ctm",
        "state.1.ark", "state.scp", "text"]


def test_the_parent_builds_no_dags_each_job_builds_its_own(tmp_path: Path, monkeypatch) -> None:
    """A transcript's DAG is about 10 KB: 10 GB for a million utterances in the parent.
    Here the parent cannot build one, yet its two jobs align every utterance with words."""
    import gc

    from asrtrain.align import transcripts
    from asrtrain.align.graph import PhoneDag
    from asrtrain.align.hmm import MonoPdfs

    frames = {"spk1-1": 120, "spk1-2": 80, "spk2-1": 100, "spk2-2": 90}
    data = _data_dir(tmp_path, frames)
    (data / "text").write_text("spk1-1 YES NO\nspk1-2 NO\nspk2-1 YES\nspk2-2\n")

    def refused(*_: object) -> None:
        raise AssertionError("the parent built a DAG")

    monkeypatch.setattr(transcripts, "phone_dag", refused)   # the jobs' processes import theirs
    lex = read_dict_dir(tmp_path / "dict")
    split = load_split("train", data, lex, pron_table(lex), None)
    assert split.transcribed == ["spk1-1", "spk1-2", "spk2-1"]
    assert split.failures.reasons == {"spk2-2": "empty transcript"}
    with split.jobs(2, None) as jobs:                     # forkserver processes
        assert jobs.nj == 2
        assert jobs.equal_alignments(MonoPdfs(sorted(lex.phones.values()))) == []
        assert jobs.aligned == 3
        assert int(jobs.pdf_frames(3 * len(lex.phones)).sum()) == 300
        assert not any(type(o) is PhoneDag for o in gc.get_objects())


def _job_corpus(n_utts: int, frames: int, dim: int, pdfs: int) -> tuple[Corpus, AcousticModel]:
    from asrtrain.align.aligner import Alignment

    rng = np.random.default_rng(1)
    spans, alis = {}, {}
    for i in range(n_utts):
        utt = f"u{i}"
        spans[utt] = (i * frames, (i + 1) * frames)
        pdf = rng.integers(0, pdfs, frames)
        alis[utt] = Alignment(pdf, pdf, np.zeros(frames, np.int64), np.array([0]))
    block = FrameBlock(rng.standard_normal((n_utts * frames, dim)).astype(np.float32), spans)
    model = AcousticModel.flat(pdfs, torch.zeros(dim, dtype=torch.float64),
                               torch.ones(dim, dtype=torch.float64))
    return Corpus(block, {}, alis), model


def test_a_jobs_passes_gather_each_pdfs_frames_from_its_matrix_not_a_copy(monkeypatch) -> None:
    corpus, model = _job_corpus(100, 500, 40, 5)   # 50,000 frames (8 MB), 10,000 a pdf
    x, rows, _ = aligned_frames(corpus)
    assert rows is not None and np.shares_memory(x.numpy(), corpus.feats.data)
    tracemalloc.start()
    try:
        stats, _, _ = accumulate(model, corpus)
        mllt_stats(model, corpus)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stats.frames == 50_000
    assert peak < 64 * 50_000      # index and labels; concatenating the features was 160 B a frame
    # the statistics of the concatenated frames, each pdf's taken whole
    monkeypatch.setattr(am, "PDF_BLOCK", None)
    concat = Corpus({u: corpus.feats[u].copy() for u in corpus.feats}, {}, corpus.alignments)
    again, _, _ = accumulate(model, concat)
    assert torch.allclose(again.sx, stats.sx, rtol=1e-12) and torch.allclose(again.sxx, stats.sxx,
                                                                              rtol=1e-12)
    assert max(len(idx) for _, idx in am.by_pdf(torch.arange(10_000) % 2, 4096)) == 4096


def _peak_rss_growth(fn) -> float:
    """MB the peak resident size rose above the current one while ``fn`` ran (Linux)."""
    def field(name: str) -> float:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(name):
                return int(line.split()[1]) / 1024
        raise KeyError(name)
    try:
        Path("/proc/self/clear_refs").write_text("5")     # reset the peak to the current size
    except OSError:
        pytest.skip("the peak resident size cannot be reset here")
    before = field("VmRSS:")
    fn()
    return field("VmHWM:") - before


def test_fmllr_statistics_of_a_long_speaker_take_bounded_memory() -> None:
    t, d = 30_000, 40          # all outer products at once: 30,000 × 41² float64 = 400 MB
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.standard_normal((t, d)))
    pdf = torch.from_numpy(rng.integers(0, 20, t))
    model = AcousticModel.flat(20, torch.zeros(d, dtype=torch.float64),
                               torch.ones(d, dtype=torch.float64))
    w = fmllr.identity(d)
    got: list = []
    grew = _peak_rss_growth(lambda: got.append(fmllr_stats(model, x, pdf, w)))
    assert grew < 150, f"fMLLR statistics of {t} frames took {grew:.0f} MB"
    xi = torch.cat([x[:3000], torch.ones(3000, 1, dtype=torch.float64)], 1)   # one block's worth
    small = fmllr_stats(model, x[:3000], pdf[:3000], w)
    whole = torch.einsum("t,ti,tj->ij", torch.ones(3000, dtype=torch.float64), xi, xi)
    assert 3000 > OUTER_ROWS and torch.allclose(small.g[0], whole, rtol=1e-12, atol=1e-9)


def test_a_large_mixture_is_evaluated_in_chunks_of_bounded_bytes(monkeypatch) -> None:
    """The SAT model as one mixture (held-out speakers' fMLLR): 16,384 frames against
    5,950 Gaussians was 0.8 GB a matrix, several at once."""
    assert chunk_rows(256) == CHUNK and chunk_rows(512, CHUNK // 4) == CHUNK // 4   # as before
    assert chunk_rows(5950) * 5950 * 8 <= CHUNK_BYTES
    budget = 1 << 20        # a small budget, so a small mixture shows the chunking
    monkeypatch.setattr(gmm_module, "CHUNK_BYTES", budget)
    c, d = 300, 3
    rows_seen: list[int] = []
    original = DiagGMM.component_loglikes

    def spy(self: DiagGMM, x: torch.Tensor) -> torch.Tensor:
        rows_seen.append(int(x.shape[0]))
        return original(self, x)

    monkeypatch.setattr(DiagGMM, "component_loglikes", spy)
    rng = np.random.default_rng(3)
    gmm = DiagGMM(torch.full((c,), 1.0 / c, dtype=torch.float64),
                  torch.from_numpy(rng.standard_normal((c, d))), torch.ones(c, d, dtype=torch.float64))
    fmllr.estimate(gmm, torch.from_numpy(rng.standard_normal((2000, d))), iters=1)
    assert rows_seen and max(rows_seen) * c * 8 <= budget
