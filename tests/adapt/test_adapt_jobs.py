"""``--nj`` of prepare fmllr and prepare ivectors: the jobs give --nj 1's results, in its
order; a failed job is one line naming it and its log, and leaves no finished stage."""

from __future__ import annotations

import shutil

import kaldiio
import numpy as np
import pytest
import torch

from asrtrain.adapt.featio import frame_counts, open_feats
from asrtrain.adapt.gmm import every_kth, subsample_frames, subsample_stride
from asrtrain.data.speaker_jobs import speaker_jobs

MODEL = ["--lda-dim", "6", "--splice", "1", "--iters", "2"]
FMLLR = [*MODEL, "--gmm-components", "4", "--gmm-iters", "2", "--sat-iters", "0", "--max-frames", "1000"]
IVECTORS = ["--ubm-components", "4", "--ubm-iters", "2", "--dim", "3", "--iters", "2",
            "--max-utts", "40"]


def invoke(*args: object):
    from click.testing import CliRunner

    from asrtrain.cli.main import cli
    return CliRunner().invoke(cli, ["prepare", *(str(a) for a in args)])


def table(scp) -> dict[str, np.ndarray]:
    return dict(kaldiio.load_scp(str(scp)).items())


def keys(scp) -> list[str]:
    return [line.split()[0] for line in scp.read_text().splitlines()]


def assert_same(a, b, exact: bool) -> None:
    ta, tb = table(a), table(b)
    assert keys(a) == keys(b)
    for k in ta:
        if exact:
            assert np.array_equal(ta[k], tb[k]), k
        else:
            np.testing.assert_allclose(ta[k], tb[k], rtol=1e-4, atol=1e-4)


def test_speakers_whole_in_jobs_balanced_by_frames() -> None:
    utts = [f"s{s}-{u}" for s in range(4) for u in range(3)]
    frames = {u: 100 if u.startswith("s0") else 10 for u in utts}
    jobs = speaker_jobs(utts, {u: u.split("-")[0] for u in utts}, frames.__getitem__, 2)
    assert jobs == [utts[:3], utts[3:]]   # the heavy speaker alone; each job in order
    assert speaker_jobs(utts[:3], {u: "s0" for u in utts[:3]}, frames.__getitem__, 4) == [utts[:3]]


def test_a_jobs_share_of_the_subsample_is_the_streams() -> None:
    rng = np.random.default_rng(0)
    for _ in range(50):
        mats = [rng.normal(size=(n, 2)).astype(np.float32) for n in rng.integers(1, 300, 12)]
        want, seen = subsample_frames(mats, 40)
        stride = subsample_stride((len(m) for m in mats), 40)
        offsets = np.cumsum([0] + [len(m) for m in mats])
        got = np.concatenate([every_kth(m, o, stride) for m, o in zip(mats, offsets, strict=False)])
        assert seen == offsets[-1] and np.array_equal(want.numpy(), got)


def test_frame_counts_from_utt2num_frames_or_the_matrices(speaker_corpus, tmp_path) -> None:
    _, feats = open_feats(speaker_corpus)
    utts = list(feats.keys())
    counts = frame_counts(speaker_corpus, feats, utts)
    assert counts == {u: len(feats[u]) for u in utts}
    data = tmp_path / "data"
    shutil.copytree(speaker_corpus, data)
    (data / "utt2num_frames").write_text("".join(f"{u} 7\n" for u in utts))
    assert set(frame_counts(data, feats, utts).values()) == {7}


@pytest.fixture(scope="module", autouse=True)
def forkserver():
    """The jobs' forkserver, started once as ``adapt.jobs`` starts it (its imports take
    seconds on a busy machine, paid by whichever test came first)."""
    import multiprocessing
    from multiprocessing import forkserver

    from asrtrain.adapt.jobs import PRELOAD

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    forkserver.ensure_running()
    first = ctx.Process(target=int)   # returns once the server has imported them
    first.start()
    first.join()


@pytest.fixture(scope="module")
def fmllr_nj1(speaker_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("fmllr") / "nj1"
    assert invoke("fmllr", speaker_corpus, out, *FMLLR, "--ali", speaker_corpus / "ali.scp",
                  "--nj", "1").exit_code == 0
    return out


@pytest.fixture(scope="module")
def ivectors_nj1(speaker_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("ivectors") / "nj1"
    assert invoke("ivectors", speaker_corpus, out, *IVECTORS, "--nj", "1").exit_code == 0
    return out


def test_fmllr_jobs_estimate_what_one_process_does(speaker_corpus, fmllr_nj1, tmp_path) -> None:
    ali = ["--ali", speaker_corpus / "ali.scp"]
    one, two = fmllr_nj1, tmp_path / "nj2"
    result = invoke("fmllr", speaker_corpus, two, *FMLLR, *ali, "--nj", "2")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (two / "data").glob("feats*.ark")) == ["feats.1.ark", "feats.2.ark"]
    assert sorted(p.name for p in (two / "log").glob("fmllr-*.log")) == [
        f"fmllr-{s}.{j}.log" for s in ("feats", "frames", "lda", "trans") for j in (1, 2)]
    # the LDA's statistics are summed in another order: equal to float precision
    np.testing.assert_allclose(kaldiio.load_mat(str(one / "lda.mat")),
                               kaldiio.load_mat(str(two / "lda.mat")), rtol=1e-6, atol=1e-8)
    assert_same(one / "trans.scp", two / "trans.scp", exact=False)
    assert_same(one / "feats.scp", two / "feats.scp", exact=False)
    # --nj is not a stage parameter: another --nj redoes nothing
    assert invoke("fmllr", speaker_corpus, two, *FMLLR, *ali, "--nj", "1").exit_code == 0
    text = "".join(p.read_text() for p in (two / "log").glob("prepare-fmllr.*.log"))
    assert all(f"stage {s}: complete, skipping" in text for s in ("lda", "gmm", "trans", "feats"))


def test_fmllr_jobs_adapt_each_speaker_bit_for_bit(speaker_corpus, fmllr_nj1, tmp_path) -> None:
    """The same LDA and GMM (--model): per-speaker arithmetic, in the jobs as here."""
    one, two = tmp_path / "nj1", tmp_path / "nj2"
    for out, nj in ((one, "1"), (two, "2")):
        assert invoke("fmllr", speaker_corpus, out, *MODEL, "--model", fmllr_nj1,
                      "--nj", nj).exit_code == 0
    assert_same(one / "trans.scp", two / "trans.scp", exact=True)
    assert_same(one / "feats.scp", two / "feats.scp", exact=True)
    assert (one / "trans.summary.json").read_text() == (two / "trans.summary.json").read_text()


def test_ivector_jobs_give_the_single_process_results(speaker_corpus, ivectors_nj1,
                                                      tmp_path) -> None:
    one, two = ivectors_nj1, tmp_path / "nj2"
    result = invoke("ivectors", speaker_corpus, two, *IVECTORS, "--nj", "2")
    assert result.exit_code == 0, result.output
    # every utterance's statistics are its own (no sums across jobs): bit for bit
    assert_same(one / "ivectors.scp", two / "ivectors.scp", exact=True)
    assert sorted(p.name for p in (two / "data").glob("*.ark")) == ["ivectors.1.ark", "ivectors.2.ark"]
    # and back to one job: one ark again, the jobs' arks gone
    (two / "stages" / "extract.json").unlink()
    assert invoke("ivectors", speaker_corpus, two, *IVECTORS).exit_code == 0
    assert sorted(p.name for p in (two / "data").glob("*.ark")) == ["ivectors.ark"]
    assert_same(one / "ivectors.scp", two / "ivectors.scp", exact=True)


def test_a_stale_utt2num_frames_is_refused_not_a_wrong_subsample(speaker_corpus,
                                                                  tmp_path) -> None:
    data = tmp_path / "data"
    shutil.copytree(speaker_corpus, data)
    _, feats = open_feats(data)
    (data / "utt2num_frames").write_text("".join(f"{u} {len(feats[u]) + (u == 'spk03-001')}\n"
                                                 for u in feats.keys()))
    result = invoke("ivectors", data, tmp_path / "iv", *IVECTORS, "--nj", "2")
    assert result.exit_code == 1
    assert "utt2num_frames: says 'spk03-001' has" in result.output


@pytest.mark.parametrize("adapted", [False, True])
def test_jobs_gather_the_gmms_subsample_of_one_stream(speaker_corpus, adapted) -> None:
    """What the GMM and each SAT round train on: the jobs' shares are the stream's frames."""
    from asrtrain.adapt.fmllr_jobs import Corpus, Source

    _, feats = open_feats(speaker_corpus)
    utts = list(feats.keys())
    utt2spk = {u: u.split("-")[0] for u in utts}
    rng = np.random.default_rng(3)
    src = Source(speaker_corpus / "feats.scp", 12, 1, rng.normal(size=(6, 36)))
    spk2utt = {s: [u for u in utts if utt2spk[u] == s] for s in sorted(set(utt2spk.values()))}
    w = {s: np.hstack([np.eye(6) + 0.1 * rng.normal(size=(6, 6)), rng.normal(size=(6, 1))])
         for s in spk2utt} if adapted else None
    got = [Corpus(speaker_corpus, src, utts, spk2utt, parts, speaker_corpus / "log").sample(900, w)
           for parts in ([utts], [utts[:20], utts[20:]])]
    assert got[0][1] == got[1][1] == sum(len(feats[u]) for u in utts)
    assert got[0][0].shape[0] < 1800 and torch.equal(got[0][0], got[1][0])


@pytest.fixture
def broken(speaker_corpus, tmp_path):
    """The corpus with a NaN in one utterance of a speaker that is not the first."""
    data = tmp_path / "broken"
    shutil.copytree(speaker_corpus, data)
    feats = table(data / "feats.scp")
    feats["spk04-005"] = feats["spk04-005"].copy()
    feats["spk04-005"][3, 1] = np.nan
    kaldiio.save_ark(str(data / "bad.ark"), feats, scp=str(data / "feats.scp"))
    return data


def _one_failed_job(result, out, stage: str) -> None:
    assert result.exit_code == 1
    errors = [ln for ln in result.output.splitlines() if ln.startswith("Error: ")]
    assert len(errors) == 1, result.output
    line = errors[0]
    assert "'spk04-005' has non-finite values" in line, line
    log = str((out / "log").resolve() / f"{stage}.")
    assert f"job 1 of 2 (log {log}1.log): " in line or f"job 2 of 2 (log {log}2.log): " in line, line
    logged = "".join(p.read_text() for p in (out / "log").glob(f"{stage}.*.log"))
    assert "Traceback" in logged and "non-finite" in logged


def test_a_failed_fmllr_job_finishes_no_stage(fmllr_nj1, broken, tmp_path) -> None:
    out = tmp_path / "out"
    _one_failed_job(invoke("fmllr", broken, out, *MODEL, "--model", fmllr_nj1, "--nj", "2"), out,
                    "fmllr-trans")
    assert not (out / "stages" / "trans.json").exists()
    assert not (out / "trans.scp").exists() and not (out / "feats.scp").exists()


def test_a_failed_ivector_job_finishes_no_stage(ivectors_nj1, broken, tmp_path) -> None:
    out = tmp_path / "out"
    result = invoke("ivectors", broken, out, "--extractor", ivectors_nj1, "--nj", "2")
    _one_failed_job(result, out, "ivectors-extract")
    assert not (out / "stages" / "extract.json").exists()
    assert not (out / "ivectors.scp").exists()


@pytest.mark.slow  # 10 s on a busy machine: each job a fresh interpreter importing torch
def test_job_cmd_jobs_give_the_local_results(speaker_corpus, ivectors_nj1, tmp_path) -> None:
    out = tmp_path / "env"
    result = invoke("ivectors", speaker_corpus, out, "--extractor", ivectors_nj1, "--nj", "2",
                    "--job-cmd", "env")   # a command that runs the job on this host
    assert result.exit_code == 0, result.output
    local = tmp_path / "local"
    assert invoke("ivectors", speaker_corpus, local, "--extractor", ivectors_nj1).exit_code == 0
    assert_same(local / "ivectors.scp", out / "ivectors.scp", exact=True)
    assert not list((out / "jobs").iterdir())   # the pass' spec and answers removed
    assert "adapt-job: job 2 of" in (out / "log" / "ivectors-extract.2.log").read_text()


def test_a_job_cmd_job_that_fails_is_one_line(broken, ivectors_nj1, tmp_path) -> None:
    out = tmp_path / "false"
    result = invoke("ivectors", broken, out, "--extractor", ivectors_nj1, "--nj", "2",
                    "--job-cmd", "false")
    errors = [ln for ln in result.output.splitlines() if ln.startswith("Error: ")]
    assert result.exit_code == 1 and len(errors) == 1, result.output
    log = (out / "log").resolve() / "ivectors-extract."
    assert f"(log {log}1.log) failed (exit status 1)" in errors[0] or \
        f"(log {log}2.log) failed (exit status 1)" in errors[0], errors[0]
    assert not (out / "stages" / "extract.json").exists() and not (out / "ivectors.scp").exists()
