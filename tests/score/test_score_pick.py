"""Dev-picked scoring: the setting comes from dev, test is reported there, the oracle beside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import InputError
from asrtrain.score.pick import pick_on
from asrtrain.score.sweep import ScoreOptions

WORDS = "A B C D E F G H I J".split()
OPTS = ScoreOptions(bootstrap=0)


def _decode_dir(path: Path, errors: dict[str, int], ref: bool = True) -> Path:
    """hyp/<name>.txt with ``errors[name]`` substitutions among 100 reference words."""
    refs = {f"spk-0001-{u:06d}": list(WORDS) for u in range(10)}
    (path / "hyp").mkdir(parents=True)
    if ref:
        (path / "ref.txt").write_text("".join(f"{u} {' '.join(w)}\n" for u, w in refs.items()))
    for name, k in errors.items():
        lines = []
        for i, (utt, words) in enumerate(refs.items()):
            n = max(0, min(10, k - 10 * i))
            lines.append(f"{utt} {' '.join(['X'] * n + words[n:])}\n")
        (path / "hyp" / f"{name}.txt").write_text("".join(lines))
    return path


def _grid(table: dict[tuple[str, str], int]) -> dict[str, int]:
    return {f"{w}_{p}": k for (w, p), k in table.items()}


# dev's optimum (10, 0.5) is interior; test's own optimum is elsewhere (12, 0.0)
DEV = _grid({("8", "0.0"): 9, ("8", "0.5"): 8, ("8", "1.0"): 9,
             ("10", "0.0"): 6, ("10", "0.5"): 4, ("10", "1.0"): 7,
             ("12", "0.0"): 7, ("12", "0.5"): 6, ("12", "1.0"): 8})
TEST = _grid({("8", "0.0"): 9, ("8", "0.5"): 9, ("8", "1.0"): 9,
              ("10", "0.0"): 7, ("10", "0.5"): 5, ("10", "1.0"): 8,
              ("12", "0.0"): 3, ("12", "0.5"): 6, ("12", "1.0"): 8})


def test_the_pick_is_the_dev_optimum_not_the_test_one(tmp_path: Path) -> None:
    dev, test = _decode_dir(tmp_path / "dev", DEV), _decode_dir(tmp_path / "test", TEST)
    s = pick_on(test, dev, OPTS)
    assert s["picked"] == {"name": "10_0.5", "lmwt": "10", "wip": "0.5"}
    assert s["test_wer"] == 5.0 and s["dev_wer"] == 4.0
    assert s["oracle"]["name"] == "12_0.0" and s["oracle"]["wer"] == 3.0
    assert s["grid"] == {"lmwt": ["8", "10", "12"], "wip": ["0.0", "0.5", "1.0"]}
    assert s["warnings"] == []
    lines = (test / "dev_picked_wer").read_text().splitlines()
    assert lines[0] == f"%WER 5.00 [ 5 / 100, 0 ins, 0 del, 5 sub ] {test / 'wer_10_0.5'}"
    assert lines[0] == (test / "wer_10_0.5").read_text().splitlines()[0] + f" {test / 'wer_10_0.5'}"
    assert lines[1] == f"# dev-picked: lmwt 10, wip 0.5 on {dev}: %WER 4.00 [ 4 / 100, 0 ins, 0 del, 4 sub ]"
    assert lines[2] == f"# best on test (oracle): %WER 3.00 [ 3 / 100, 0 ins, 0 del, 3 sub ] {test / 'wer_12_0.0'}"
    assert json.loads((test / "score" / "dev_picked.json").read_text()) == s
    assert (test / "best_wer").read_text().endswith("wer_12_0.0\n")   # the oracle, as before
    assert (dev / "wer_10_0.5").is_file()


def test_ties_go_to_the_centre_of_the_tied_settings_then_the_smaller_weight(tmp_path: Path) -> None:
    # tied at 4: (10, 0.0), (10, 0.5), (12, 0.0); their centre in grid steps is nearest (10, 0.0)
    tied = dict(DEV, **{"12_0.0": 4, "10_0.0": 4})
    s = pick_on(_decode_dir(tmp_path / "test", TEST), _decode_dir(tmp_path / "dev", tied), OPTS)
    assert s["picked"]["name"] == "10_0.0"
    # a small dev set error-free over a row of weights: the middle of the plateau, not its edge
    flat = {f"{w}_{p}": (0 if p == "0.5" and w in ("8", "10", "12", "14", "16") else 5)
            for w in ("6", "8", "10", "12", "14", "16", "18") for p in ("0.0", "0.5", "1.0")}
    grid = {n: 3 for n in flat}
    s = pick_on(_decode_dir(tmp_path / "test2", grid), _decode_dir(tmp_path / "dev2", flat), OPTS)
    assert s["picked"]["name"] == "12_0.5"
    # two tied settings equally near their centre: the first in grid order
    pair = dict(DEV, **{"8_0.0": 1, "12_1.0": 1})
    s = pick_on(_decode_dir(tmp_path / "test3", TEST), _decode_dir(tmp_path / "dev3", pair), OPTS)
    assert s["picked"]["name"] == "8_0.0"


def test_a_pick_on_an_edge_is_a_warning(tmp_path: Path, caplog) -> None:
    edge = dict(DEV, **{"8_0.0": 1})
    dev, test = _decode_dir(tmp_path / "dev", edge), _decode_dir(tmp_path / "test", TEST)
    with caplog.at_level("WARNING", logger="asrtrain"):
        s = pick_on(test, dev, OPTS)
    assert s["picked"]["name"] == "8_0.0"
    assert s["warnings"] == [
        "the dev pick LM weight 8 is the lowest swept (8..12): the optimum may lie outside the "
        "grid; widen --lmwt below 8",
        "the dev pick penalty 0.0 is the lowest swept (0.0..1.0): the optimum may lie outside "
        "the grid; widen --wip below 0.0"]
    assert all(w in caplog.text for w in s["warnings"])
    assert (test / "dev_picked_wer").read_text().count("# warning: ") == 2


def test_plain_names_pick_over_lm_weights_only(tmp_path: Path) -> None:
    dev = _decode_dir(tmp_path / "dev", {"8": 5, "10": 3, "12": 4})
    test = _decode_dir(tmp_path / "test", {"8": 5, "10": 4, "12": 2})
    s = pick_on(test, dev, OPTS)
    assert s["picked"] == {"name": "10", "lmwt": "10", "wip": "0.0"}
    assert s["grid"]["wip"] == ["0.0"] and s["warnings"] == []  # one penalty: no wip edge
    assert (test / "dev_picked_wer").read_text().startswith("%WER 4.00 [ 4 / 100")


def test_different_grids_and_a_dev_without_reference_are_refused(tmp_path: Path) -> None:
    test = _decode_dir(tmp_path / "test", TEST)
    fewer = _decode_dir(tmp_path / "dev", {k: v for k, v in DEV.items() if not k.endswith("1.0")})
    with pytest.raises(InputError, match=f"dev {fewer} and test {test} were decoded with "
                       "different grids \\(dev: lmwt 8,10,12, wip 0.0,0.5; test: lmwt 8,10,12, "
                       "wip 0.0,0.5,1.0\\)"):
        pick_on(test, fewer, OPTS)
    noref = _decode_dir(tmp_path / "noref", DEV, ref=False)
    with pytest.raises(InputError, match=f"{noref / 'ref.txt'}: no reference text for --pick-on"):
        pick_on(test, noref, OPTS)
    with pytest.raises(InputError, match="names the test directory itself"):
        pick_on(test, test, OPTS)
    assert not (test / "dev_picked_wer").exists()


def test_cli_pick_on(tmp_path: Path) -> None:
    dev, test = _decode_dir(tmp_path / "dev", DEV), _decode_dir(tmp_path / "test", TEST)
    r = CliRunner().invoke(cli, ["score", "--sweep", str(test), "--pick-on", str(dev),
                                 "--bootstrap", "0"])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()                      # after the sweeps' log lines
    start = next(i for i, line in enumerate(lines) if line.startswith("dev-picked"))
    assert lines[start:start + 2] == [
        f"dev-picked (10_0.5 on {dev}): %WER 5.00 [ 5 / 100, 0 ins, 0 del, 5 sub ] "
        f"{test / 'wer_10_0.5'}",
        f"best on test (oracle): %WER 3.00 [ 3 / 100, 0 ins, 0 del, 3 sub ] {test / 'wer_12_0.0'}"]
    (dev / "hyp" / "12_1.0.txt").unlink()
    r = CliRunner().invoke(cli, ["score", "--sweep", str(test), "--pick-on", str(dev)])
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1
    assert "were decoded with different grids" in r.output
    r = CliRunner().invoke(cli, ["score", str(test / "ref.txt"), str(test / "hyp" / "8_0.0.txt"),
                                 str(tmp_path / "o"), "--pick-on", str(dev)])
    assert r.exit_code == 2 and "--pick-on DEV_DECODE_DIR goes with --sweep" in r.output
