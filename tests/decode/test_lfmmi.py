"""Lattice-free MMI (``prepare den-graph``, ``train-seq`` with a graph file).

The forward-backward must equal the sum over every path of a small graph, enumerated; the
mini corpus's graph must hold every training utterance's reference path and be a proper
distribution; ``train-seq`` against it must raise the objective its own code computes, keep
a model ``decode`` reads, and refuse a graph of another tree.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.train.den_graph import DenGraph
from asrtrain.train.lfmmi import DenMatrices, den_posteriors


def _cli(*args: object) -> str:
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res.output


def _small_graph() -> DenGraph:
    """Four states, pdfs 0 1 1 2: loops, a skip, two starts and two ends."""
    arcs = {(0, 0): 0.5, (0, 1): 0.3, (0, 3): 0.2, (1, 1): 0.6, (1, 2): 0.4, (2, 2): 0.7,
            (2, 0): 0.1, (3, 3): 0.5, (3, 2): 0.5}
    src, dst = zip(*arcs, strict=True)
    return DenGraph(pdf=np.array([0, 1, 1, 2]), src=np.array(src), dst=np.array(dst),
                    prob=np.array(list(arcs.values())), initial=np.array([0.6, 0.0, 0.0, 0.4]),
                    final=np.array([0.0, 0.0, 0.2, 0.0]), tree_id="t")


def _enumerate(graph: DenGraph, scores: np.ndarray) -> tuple[np.ndarray, float]:
    """γ [T, P] and log Σ over every state sequence, by brute force."""
    arcs = {(int(a), int(b)): float(p) for a, b, p in zip(graph.src, graph.dst, graph.prob, strict=True)}
    t_count, p_count = scores.shape
    post, total = np.zeros((t_count, p_count)), 0.0
    for path in itertools.product(range(graph.num_states), repeat=t_count):
        w = graph.initial[path[0]] * graph.final[path[-1]]
        for a, b in zip(path, path[1:], strict=False):
            w *= arcs.get((a, b), 0.0)
        w *= np.exp(sum(scores[t, graph.pdf[s]] for t, s in enumerate(path)))
        total += w
        for t, s in enumerate(path):
            post[t, graph.pdf[s]] += w
    return post / total, float(np.log(total))


def test_the_forward_backward_is_the_sum_over_every_path() -> None:
    graph = _small_graph()
    rng = np.random.default_rng(0)
    scores = [rng.normal(size=(5, 3)) * 2, rng.normal(size=(3, 3)) * 2]   # two lengths, one step
    got = den_posteriors(DenMatrices.of(graph, 3), scores)
    for (post, total), sc in zip(got, scores, strict=True):
        want_post, want_total = _enumerate(graph, sc)
        assert total == pytest.approx(want_total, abs=1e-4)
        np.testing.assert_allclose(post, want_post, atol=1e-5)


def test_a_length_no_path_has_is_one_clear_error() -> None:
    graph = _small_graph()
    graph.final = np.array([1.0, 0.0, 0.0, 0.0])   # ends only in state 0, which needs state 2 first
    graph.initial = np.array([0.0, 0.0, 0.0, 1.0])
    with pytest.raises(ValueError, match="no path of the denominator graph ends"):
        den_posteriors(DenMatrices.of(graph, 3), [np.zeros((1, 3))])


@pytest.fixture(scope="module")
def den_graph(mini_lang_dec, mini_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("den") / "den.npz"
    printed = _cli("prepare", "den-graph", mini_lang_dec, mini_corpus, out)
    assert "states" in printed
    return out


def test_the_graph_is_a_distribution_that_holds_every_reference_path(den_graph, trained) -> None:
    from asrtrain.data.shards import open_archive
    from asrtrain.train.sequence import references

    graph = DenGraph.load(den_graph)
    leaving = np.bincount(graph.src, weights=graph.prob, minlength=graph.num_states) + graph.final
    np.testing.assert_allclose(leaving, 1.0, atol=1e-9)
    assert graph.initial.sum() == pytest.approx(1.0)
    final, _, _ = trained
    archive = open_archive(final.parent / "train.h5")
    refs = references(archive, [(u, (f, n, t)) for u, f, n, t in archive.utterances])
    den = DenMatrices.of(graph, archive.num_pdfs)
    utts = sorted(refs)[:6]
    # scores that all but name the reference: the graph's posterior follows it wherever it can
    scores = [np.where(np.eye(archive.num_pdfs, dtype=bool)[refs[u]], 0.0, -30.0) for u in utts]
    for u, (post, _) in zip(utts, den_posteriors(den, scores), strict=True):
        on_ref = post[np.arange(refs[u].size), refs[u]]
        assert on_ref.min() > 0.99, (u, on_ref.min())


def test_lfmmi_raises_its_objective_and_keeps_a_decodable_model(trained, den_graph, mini_lang_dec, tmp_path):
    from asrtrain.model.io import load_final
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, dev, _ = trained
    train = final.parent / "train.h5"
    out = tmp_path / "lfmmi"
    printed = _cli("train-seq", final, train, den_graph, out, "--epochs", "2", "--lr", "0.5",
                   "--ce-weight", "0", "--threads", "1")
    assert "lattice-free MMI-trained" in printed
    cfg = SequenceConfig()
    before = SequenceTrainer(final, train, den_graph, tmp_path / "x", cfg).objective()
    after = SequenceTrainer(out / "final.pt", train, den_graph, tmp_path / "y", cfg).objective()
    assert after > before + 1e-3, (before, after)
    new = load_final(out / "final.pt")
    assert new.meta["sequence"]["criterion"] == "lf-mmi"
    _cli("decode", out / "final.pt", mini_lang_dec / "graph", dev, tmp_path / "dec", "--nj", "1", "--lmwt", "10")
    assert (tmp_path / "dec" / "hyp" / "10.txt").read_text()


def test_a_graph_of_another_tree_is_refused(trained, den_graph, tmp_path):
    graph = DenGraph.load(den_graph)
    graph.tree_id = "0123456789abcdef"
    other = tmp_path / "other.npz"
    graph.save(other)
    final, _, _ = trained
    res = CliRunner().invoke(cli, ["train-seq", str(final), str(final.parent / "train.h5"), str(other),
                                   str(tmp_path / "o")])
    assert res.exit_code == 1 and "0123456789abcdef" in res.output and str(other) in res.output, res.output
    assert not (tmp_path / "o" / "final.pt").exists()


def test_a_model_trained_with_context_keeps_it_through_lfmmi(trained, trained_with_context, den_graph,
                                                             mini_lang_dec, tmp_path):
    """A network trained with ``train --context C`` sees C frames of each neighbouring chunk:
    LF-MMI must run it on those chunks (the steps differ from the same weights run bare) and
    its model must keep C, so that ``decode`` gives it the context it was trained with."""
    from asrtrain.model.io import load_final
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, dev, _ = trained
    train = final.parent / "train.h5"
    opts = ["--epochs", "1", "--lr", "0.5", "--threads", "1", "--diagnostic-utts", "4"]
    _cli("train-seq", final, train, den_graph, tmp_path / "bare", *opts)
    _cli("train-seq", trained_with_context, train, den_graph, tmp_path / "ctx", *opts)
    out = load_final(tmp_path / "ctx" / "final.pt")
    assert out.meta["train_config"]["context"] == 3
    assert SequenceTrainer(tmp_path / "ctx" / "final.pt", train, den_graph, tmp_path / "x",
                           SequenceConfig()).context == 3
    bare = load_final(tmp_path / "bare" / "final.pt").model.state_dict()
    assert any(not torch.equal(value, bare[name]) for name, value in out.model.state_dict().items())
    printed = _cli("decode", tmp_path / "ctx" / "final.pt", mini_lang_dec / "graph", dev, tmp_path / "dec",
                   "--nj", "1", "--lmwt", "10")
    assert (tmp_path / "dec" / "hyp" / "10.txt").read_text(), printed


def test_two_learners_take_the_steps_one_learner_takes(trained, den_graph, tmp_path):
    """SSGD in train-seq: each learner a share of every step's utterances, the gradients summed
    and the loss divided by the step's frames over both; the models end where one learner's does
    (up to the float order of the sums) and the learners' logs are written."""
    import torch

    final, _, _ = trained
    train = final.parent / "train.h5"
    opts = ["--epochs", "2", "--lr", "0.5", "--utts-per-step", "3", "--threads", "1", "--diagnostic-utts", "5",
            "--valid", train]
    _cli("train-seq", final, train, den_graph, tmp_path / "one", *opts)
    printed = _cli("train-seq", final, train, den_graph, tmp_path / "two", *opts, "--nproc", "2")
    assert "lattice-free MMI-trained" in printed
    a = torch.load(tmp_path / "one" / "final.pt", weights_only=True)
    b = torch.load(tmp_path / "two" / "final.pt", weights_only=True)
    moved = 0.0
    start = torch.load(final, weights_only=True)["state_dict"]
    for name, value in a["state_dict"].items():
        torch.testing.assert_close(b["state_dict"][name], value, rtol=1e-4, atol=1e-5)
        moved = max(moved, float((value.float() - start[name].float()).abs().max()))
    assert moved > 1e-3   # the steps did move the weights
    for key in ("diagnostic_objective", "valid_loss", "valid_acc"):   # held-out: each learner a share
        one, two = ([row[key] for row in m["meta"]["sequence"]["history"]] for m in (a, b))
        np.testing.assert_allclose(two, one, rtol=1e-4)
    assert sorted(p.name for p in (tmp_path / "two" / "log").glob("*rank*")) == \
        ["train.rank0.log", "train.rank1.log"]


def test_from_scratch_draws_fresh_weights_and_mmi_alone_trains_them(trained, den_graph, tmp_path):
    """Chain's way: MODEL gives the shape, input normalisation and priors, the weights are drawn
    as the cross-entropy trainer draws them (by --seed), and MMI from there raises the
    objective; the rate falls by a constant factor each epoch to --final-lr, a rule the resume
    key then holds the number of epochs to."""
    from asrtrain.model.io import load_final
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, _, _ = trained
    train = final.parent / "train.h5"
    ce = load_final(final).model.state_dict()
    draws = [SequenceTrainer(final, train, den_graph, tmp_path / f"d{i}",
                             SequenceConfig(from_scratch=True, seed=seed)).model.state_dict()
             for i, seed in enumerate((3, 3, 4))]
    for name, value in ce.items():
        torch.testing.assert_close(draws[1][name], draws[0][name], rtol=0, atol=0)
        if name.startswith("feat_"):
            torch.testing.assert_close(draws[0][name], value, rtol=0, atol=0)
    assert not torch.equal(draws[0]["output.weight"], ce["output.weight"])
    assert not torch.equal(draws[2]["output.weight"], draws[0]["output.weight"])

    out = tmp_path / "scratch"
    opts = ["--from-scratch", "--acwt", "1", "--lr", "0.4", "--final-lr", "0.1", "--clip", "5",
            "--utts-per-step", "2", "--threads", "1", "--diagnostic-utts", "6"]
    _cli("train-seq", final, train, den_graph, out, "--epochs", "3", *opts)
    history = load_final(out / "final.pt").meta["sequence"]["history"]
    assert [row["lr"] for row in history[1:]] == pytest.approx([0.4, 0.2, 0.1])
    objective = [row["diagnostic_objective"] for row in history]
    assert objective[-1] > objective[0] + 0.1, objective
    res = CliRunner().invoke(cli, ["train-seq", str(final), str(train), str(den_graph), str(out),
                                   "--epochs", "4", *opts])
    assert res.exit_code == 1 and "--epochs 3 (now 4)" in res.output, res.output


def test_a_state_written_before_an_option_existed_still_resumes(trained, den_graph, tmp_path):
    """A state of an earlier version lacks the newer options in its key: they count as their defaults."""
    final, _, _ = trained
    train = final.parent / "train.h5"
    out = tmp_path / "old"
    opts = ["--threads", "1", "--utts-per-step", "3", "--diagnostic-utts", "3"]
    _cli("train-seq", final, train, den_graph, out, "--epochs", "1", *opts)
    state = torch.load(out / "state.pt", weights_only=True)
    for name in ("from_scratch", "final_lr", "clip"):
        del state["key"]["options"][name]
    torch.save(state, out / "state.pt")
    assert "resuming after epoch 1" in _cli("train-seq", final, train, den_graph, out, "--epochs", "2", *opts)


def test_a_preemption_signal_stops_before_the_next_update_and_the_epoch_is_done_again(trained, den_graph, tmp_path):
    """SIGTERM in epoch 2: no epoch-2 model, state.pt still epoch 1's, the requeue error; the
    same command then resumes after epoch 1."""
    import os
    import signal

    from asrtrain.core.errors import Preempted
    from asrtrain.distributed import signals
    from asrtrain.train.sequence import SequenceTrainer
    from asrtrain.train.sequence_config import SequenceConfig

    final, _, _ = trained
    train = final.parent / "train.h5"
    out = tmp_path / "pre"
    opts = ["--threads", "1", "--utts-per-step", "3", "--diagnostic-utts", "3"]
    _cli("train-seq", final, train, den_graph, out, "--epochs", "1", *opts)
    state = (out / "state.pt").read_bytes()
    cfg = SequenceConfig(utts_per_step=3, diagnostic_utts=3, epochs=2)
    trainer = SequenceTrainer(final, train, den_graph, out, cfg)
    with signals.caught(), pytest.raises(Preempted, match="holds epoch 1: run the same command again"):
        os.kill(os.getpid(), signal.SIGTERM)
        trainer.run()
    assert not (out / "epoch2.pt").exists() and (out / "state.pt").read_bytes() == state
    assert "resuming after epoch 1" in _cli("train-seq", final, train, den_graph, out, "--epochs", "2", *opts)
    assert (out / "epoch2.pt").exists()


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (the learners, the forkserver that forked them), from /proc."""
    from pathlib import Path

    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def test_learners_whose_launcher_is_killed_stop(trained, den_graph, tmp_path):
    """SIGKILL to `--nproc`'s launcher forwards nothing, and train-seq's learners use no store a
    dead launcher would break: they see it gone and stop (they had trained on, orphaned, for
    every epoch asked)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from asrtrain.distributed.local import _alive

    final, _, _ = trained
    out = tmp_path / "orphans"
    asrtrain = Path(sys.executable).parent / "asrtrain"
    job = subprocess.Popen([str(asrtrain), "train-seq", str(final), str(final.parent / "train.h5"), str(den_graph),
                            str(out), "--epochs", "500", "--nproc", "2", "--threads", "1", "--diagnostic-utts", "3"],
                           start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    logs = [out / "log" / f"train.rank{r}.log" for r in (0, 1)]
    end = time.monotonic() + 120
    while time.monotonic() < end and not all(p.is_file() and "sequence training" in p.read_text() for p in logs):
        time.sleep(0.2)
    below = _descendants(job.pid)
    assert job.poll() is None and len(below) >= 2, "the learners did not start"
    os.kill(job.pid, signal.SIGKILL)
    job.wait(timeout=30)
    end = time.monotonic() + 60
    while time.monotonic() < end and any(_alive(p) for p in below):
        time.sleep(0.2)
    left = [p for p in below if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, "learners outlived their launcher"
    texts = [p.read_text() for p in logs]
    # The first learner to see the launcher gone stops them all at the next step (any learner's
    # stop is everyone's), so a slower one may stop before its own watch looks: one says why.
    assert any("is gone: this learner stops" in t for t in texts)
    assert all("(a preemption signal)" in t for t in texts), "a learner stopped some other way"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: the denominator on cuda")
def test_the_denominator_on_the_gpu_matches_the_cpu():
    graph = _small_graph()
    rng = np.random.default_rng(3)
    scores = [rng.normal(size=(n, 3)).astype(np.float32) for n in (5, 3)]
    cpu = den_posteriors(DenMatrices.of(graph, 3), scores)
    gpu = den_posteriors(DenMatrices.of(graph, 3).to("cuda"), scores)
    for (pc, zc), (pg, zg) in zip(cpu, gpu, strict=True):
        np.testing.assert_allclose(pg, pc, rtol=1e-4, atol=1e-6)
        assert zg == pytest.approx(zc, rel=1e-5)
