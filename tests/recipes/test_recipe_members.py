"""recipes/custom --members N: N-1 more networks trained as the first (other seeds, their LF-MMI
too), decoded, scored and exported as one ensemble, the first network beside it; with the
asrtrain shim of test_recipe_shim_stages (commands recorded, nothing run)."""

from __future__ import annotations

from pathlib import Path

from test_recipe_shim_stages import run_stages


def _ok(proc) -> None:
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_members_train_as_the_first_from_other_seeds(tmp_path: Path) -> None:
    proc, commands = run_stages(tmp_path, 6, 6, "--members", "3", "--lfmmi", "true", "--seed", "5")
    _ok(proc)
    exp = tmp_path / "exp"
    trains = [c.split() for c in commands if c.startswith("train ")]
    seqs = [c.split() for c in commands if c.startswith("train-seq ")]
    assert [t[2] for t in trains] == [str(exp / d) for d in ("blstm", "blstm_m2", "blstm_m3")]
    assert [t[t.index("--seed") + 1] for t in trains] == ["5", "6", "7"]
    # every option but the seed as the first network's
    strip = lambda t: [a for i, a in enumerate(t[3:]) if "--seed" not in t[3:][max(i - 1, 0):i + 1]]  # noqa: E731
    assert strip(trains[1]) == strip(trains[0]) == strip(trains[2])
    assert [(s[1], s[4]) for s in seqs] == [(str(exp / f"{d}/final.pt"), str(exp / f"{d}_lfmmi"))
                                            for d in ("blstm", "blstm_m2", "blstm_m3")]
    assert sum(c.startswith("prepare den-graph") for c in commands) == 1   # made once, shared


def test_a_resumed_run_decodes_scores_and_exports_the_ensemble(tmp_path: Path) -> None:
    run_stages(tmp_path, 7, 7)     # makes the copy; then the test split gets a transcript
    (tmp_path / "test" / "text").write_text("u1 a b\n")
    proc, commands = run_stages(tmp_path, 7, 8, "--members", "2", "--lfmmi", "true")
    _ok(proc)
    exp = tmp_path / "exp"
    lines = proc.stdout.splitlines()
    decodes = [c.split() for c in commands if c.startswith("decode ")]
    one, both = decodes[:2], decodes[2:]
    assert [d[1] for d in one] == [str(exp / "blstm_lfmmi/final.pt")] * 2   # the first network alone
    for d in both:
        assert d[1] == str(exp / "blstm_lfmmi/final.pt") and d[4].startswith(str(exp / "ensemble/decode_"))
        assert d[d.index("--ensemble") + 1] == str(exp / "blstm_m2_lfmmi/final.pt")
    scores = [c.split() for c in commands if c.startswith("score ")]
    assert [c[2] for c in scores][-2:] == [str(exp / "blstm_lfmmi/decode_test"), str(exp / "ensemble/decode_test")]
    beside = [ln for ln in lines if ln.startswith("one network (blstm_lfmmi, seed 0): %WER")]
    assert len(beside) == 1 and lines.index(beside[0]) < len(lines) - 1
    # the shim's score writes no dev pick: the export stage reads it where score would leave it
    (exp / "ensemble/decode_dev/best_wer").write_text("%WER 1.00 [ 1 / 100 ] x/wer_9_0.0\n")
    proc, commands = run_stages(tmp_path, 9, 9, "--members", "2", "--lfmmi", "true")
    _ok(proc)
    export = next(c.split() for c in commands if c.startswith("export "))
    assert export[1] == str(exp / "blstm_lfmmi/final.pt")
    assert export[export.index("--ensemble") + 1] == str(exp / "blstm_m2_lfmmi/final.pt")
    assert export[export.index("--pick-on") + 1] == str(exp / "ensemble/decode_dev")


def test_the_rule_gives_the_members_and_a_bad_count_is_one_line(tmp_path: Path) -> None:
    proc, commands = run_stages(tmp_path, 6, 6)
    _ok(proc)
    assert sum(c.startswith("train ") for c in commands) == 1    # the SIZES: 1
    sizes = tmp_path / "data" / "sizes.sh"
    sizes.write_text(sizes.read_text().replace("members=1", "members=2"))
    proc, commands = run_stages(tmp_path, 6, 6)
    _ok(proc)
    assert sum(c.startswith("train ") for c in commands) == 2
    proc, commands = run_stages(tmp_path, 6, 6, "--members", "0")
    assert proc.returncode != 0 and not commands
    assert [ln for ln in proc.stderr.splitlines() if "--members must be" in ln]
