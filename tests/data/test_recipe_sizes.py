"""The recipe sizes that scale with the corpus (asrtrain/data/sizes.py, `prepare sizes`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrtrain.core.errors import InputError
from asrtrain.data.sizes import (
    CHUNK_FRAMES,
    CONTEXT_FRAMES,
    DROPOUT,
    ENSEMBLE_MEMBERS,
    FRAMES_PER_GAUSSIAN,
    FRAMES_PER_HOUR,
    FRAMES_PER_LEAF,
    LFMMI_UTTS_PER_STEP,
    MIN_BATCH,
    MIN_STEPS_PER_EPOCH,
    SPEC_AUGMENT,
    count_frames,
    learners_for,
    recipe_sizes,
    shell_lines,
)


def test_sizes_grow_with_the_hours_and_match_the_anchors() -> None:
    demo = recipe_sizes(int(0.744 * FRAMES_PER_HOUR), lm_tokens=900_000)
    # the demo's size: 300 pdfs, 3x160 at 0.5 as it sets by hand (its batch 128 and its 1,000
    # leaves too: the rule's floors of steps an epoch and of frames a leaf came from real speech)
    assert demo["ali_leaves"] == 300 and demo["ali_gauss"] == 1790   # 900 and 150 frames each
    assert demo["num_pdfs"] == 600   # twice its 300 leaves (the demo sets its own 300)
    assert (demo["layers"], demo["hidden"], demo["lr"]) == (3, 160, 0.5)
    assert demo["lm_order"] == 3
    paper = recipe_sizes(2000 * FRAMES_PER_HOUR, lm_tokens=50_000_000)
    assert (paper["layers"], paper["hidden"], paper["proj"], paper["epochs"]) == (6, 512, 256, 16)
    assert 30_000 <= paper["num_pdfs"] <= 40_000 and paper["lm_order"] == 4
    hours = [0.05, 0.5, 5, 50, 500]
    sizes = [recipe_sizes(int(h * FRAMES_PER_HOUR)) for h in hours]
    for key in ("ali_leaves", "ali_gauss", "num_pdfs", "hidden", "layers"):
        values = [s[key] for s in sizes]
        assert values == sorted(values), key
    tiny = recipe_sizes(int(0.05 * FRAMES_PER_HOUR))
    frames = 0.05 * FRAMES_PER_HOUR   # yesno's size: data, not the power law, bounds the models
    assert tiny["ali_leaves"] == 50 and tiny["ali_gauss"] <= frames / FRAMES_PER_GAUSSIAN + 10
    # speechocean762's 40-minute cut: 900 frames a leaf (the SAT GMM 73.97% at 250 leaves,
    # 86.62% at 1,020); beyond 5 h the power law, as before
    cut = recipe_sizes(226_383)
    assert (cut["ali_leaves"], cut["ali_gauss"]) == (250, 1500)
    assert recipe_sizes(226_383 * 8)["ali_leaves"] == 226_383 * 8 // FRAMES_PER_LEAF // 10 * 10
    assert recipe_sizes(100 * FRAMES_PER_HOUR)["ali_leaves"] == 6010
    assert "lm_order" not in tiny
    # the SAT stream below ADAPT_STREAMS_HOURS, i-vectors and the global fMLLR from it on
    assert [s["streams"] for s in sizes] == ["fmllr,logmel"] * 3 + ["fmllr,ivector,logmel"] * 2
    assert [s["fmllr_source"] for s in sizes] == ["sat"] * 3 + ["global"] * 2
    # below 20 h the network's own question tree, twice the aligner's leaves (speechocean762's
    # 2.7 h: 2,000 against the SAT rung's 1,080 and a 720-pdf count tree, two seeds); a count
    # tree of ~400 h^0.6 pdfs beyond (the papers' 32,000 at 2,000 h)
    assert [s["hybrid_tree"] for s in sizes] == ["questions"] * 3 + ["counts"] * 2
    assert [s["num_pdfs"] for s in sizes[:3]] == [2 * s["ali_leaves"] for s in sizes[:3]]
    assert paper["streams"] == "fmllr,ivector,logmel" and demo["streams"] == "fmllr,logmel"
    # Kaldi's plateau schedule below 20 h (measured on speechocean762), the papers' anneal beyond
    assert [s["lr_schedule"] for s in sizes] == ["plateau"] * 3 + ["paper"] * 2
    assert [s["plateau_stop"] for s in sizes] == [3] * 3 + [""] * 2   # early stopping with the plateau only
    # the last 3 epochs averaged below 20 h (measured on speechocean762's cut), the best epoch beyond
    assert [s["select"] for s in sizes] == ["average:3"] * 3 + ["best"] * 2
    # lattice-free MMI from 2 h (speechocean762's 2.7 h gained on both seeds; its 40-minute cut: noise)
    assert [s["lfmmi"] for s in sizes] == ["false"] * 2 + ["true"] * 3
    assert cut["lfmmi"] == "false" and recipe_sizes(162 * FRAMES_PER_HOUR // 60)["lfmmi"] == "true"
    # the chunks' context below 20 h (speechocean762's 2.7 h and its 40-minute cut, two seeds
    # each; half the cut, three seeds, and a quarter of it, two; yesno unharmed), the papers' bare
    # chunks beyond
    assert [s["context"] for s in sizes] == [CONTEXT_FRAMES] * 3 + [0, 0]
    assert cut["context"] == CONTEXT_FRAMES and recipe_sizes(int(0.3 * FRAMES_PER_HOUR))["context"] == CONTEXT_FRAMES
    assert recipe_sizes(int(19.9 * FRAMES_PER_HOUR))["context"] == CONTEXT_FRAMES
    assert recipe_sizes(20 * FRAMES_PER_HOUR)["context"] == 0
    assert recipe_sizes(3 * FRAMES_PER_HOUR, chunk=6)["context"] == 6   # train allows one whole neighbour
    # dropout and SpecAugment below 20 h (speechocean762's 2.7 h, and with the context its cut,
    # half and a quarter of it), off beyond
    assert [s["dropout"] for s in sizes] == [DROPOUT] * 3 + [0.0, 0.0]
    assert [s["spec_augment"] for s in sizes] == [SPEC_AUGMENT] * 3 + ["off", "off"]
    assert cut["dropout"] == DROPOUT and tiny["spec_augment"] == SPEC_AUGMENT
    # two networks decoded as one from 2 h to 20 h (speechocean762's 2.7 h), one elsewhere
    assert [s["members"] for s in sizes] == [1, 1, ENSEMBLE_MEMBERS, 1, 1] and ENSEMBLE_MEMBERS == 2
    assert cut["members"] == 1 and recipe_sizes(162 * FRAMES_PER_HOUR // 60)["members"] == 2


def test_small_corpora_get_a_batch_that_leaves_enough_steps_an_epoch() -> None:
    steps = []
    for minutes in (3, 6, 12, 25, 44, 120, 162, 600, 1200):
        frames = minutes * FRAMES_PER_HOUR // 60
        sizes = recipe_sizes(frames)
        batch = sizes["batch"]
        assert batch & (batch - 1) == 0   # a power of two
        # the base batch stays the rule's, so halving the batch keeps the rate per chunk
        assert sizes["base_batch"] == (128 if minutes < 1200 else 256) >= batch
        chunks = frames // CHUNK_FRAMES
        assert batch == MIN_BATCH or chunks >= MIN_STEPS_PER_EPOCH * batch, minutes
        assert batch == 128 or chunks < MIN_STEPS_PER_EPOCH * 2 * batch, minutes   # largest such
        steps.append(chunks // batch)
    assert recipe_sizes(6 * FRAMES_PER_HOUR // 60)["batch"] == 16
    so = recipe_sizes(162 * FRAMES_PER_HOUR // 60)   # speechocean762's 2.7 h: 0.125 a step, as measured
    assert so["batch"] == 32 and so["lr"] * so["batch"] / so["base_batch"] == 0.125
    assert recipe_sizes(500 * FRAMES_PER_HOUR)["base_batch"] == 256
    # longer chunks mean fewer of them: the same minutes get a smaller batch
    assert recipe_sizes(4 * FRAMES_PER_HOUR, chunk=41)["batch"] < recipe_sizes(4 * FRAMES_PER_HOUR)["batch"]


def test_frames_come_from_utt2num_frames_and_bad_lines_are_named(tmp_path: Path) -> None:
    (tmp_path / "utt2num_frames").write_text("a 100\nb 250\n")
    assert count_frames(tmp_path) == (350, 2)
    # speed-perturbed copies (utt2uniq) count once, at the original's length
    (tmp_path / "utt2num_frames").write_text("sp0.9-a 111\na 100\nsp1.1-a 91\nb 250\n")
    (tmp_path / "utt2uniq").write_text("sp0.9-a a\na a\nsp1.1-a a\nb b\n")
    assert count_frames(tmp_path) == (350, 2)
    (tmp_path / "utt2uniq").write_text("sp0.9-a a\nsp1.1-a\n")
    with pytest.raises(InputError, match="line 2: expected 'utt original-utt'"):
        count_frames(tmp_path)
    (tmp_path / "utt2uniq").unlink()
    (tmp_path / "utt2num_frames").write_text("a 100\nb x\n")
    with pytest.raises(InputError, match="line 2: expected 'utt frames'"):
        count_frames(tmp_path)
    with pytest.raises(InputError, match="no training frames"):
        recipe_sizes(0)
    assert shell_lines({"a": 1, "lr": 0.5}) == "a=1\nlr=0.5\n"


def test_learners_one_on_cpus_or_one_gpu_ssgd_over_several() -> None:
    assert learners_for(0) == learners_for(0, 1) == {"strategy": "single", "nproc": 1, "lfmmi_nproc": 1}
    assert learners_for(1, 16) == {"strategy": "single", "nproc": 1, "lfmmi_nproc": 1}
    assert learners_for(8, 64) == {"strategy": "ssgd", "nproc": 8, "lfmmi_nproc": 8}
    # train-seq on CPUs: a learner a core, no more than a step's utterances
    assert learners_for(0, 2)["lfmmi_nproc"] == 2 and learners_for(0, 64)["lfmmi_nproc"] == LFMMI_UTTS_PER_STEP


def test_prepare_sizes_prints_lines_a_recipe_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from asrtrain.cli.main import cli
    from asrtrain.distributed import launch

    monkeypatch.setattr(launch, "local_gpus", lambda: 0)   # the learners for a machine without GPUs
    (tmp_path / "utt2num_frames").write_text("".join(f"u{i} 1000\n" for i in range(400)))
    out = CliRunner().invoke(cli, ["prepare", "sizes", str(tmp_path)])
    assert out.exit_code == 0, out.output
    values = dict(line.split("=", 1) for line in out.output.splitlines() if line and not line.startswith("#"))
    assert values["batch"] == "16" and values["base_batch"] == "128" and values["strategy"] == "single"
