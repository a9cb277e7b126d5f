"""Dev-picked scoring: choose the (LM weight, penalty) on dev, report test at that point.

The best WER over settings on the test set itself (``best_wer``) is an oracle: the
setting was chosen by looking at the test references. ``pick_on`` sweeps a dev decode
and the test decode over the same grid, takes the setting with the fewest dev errors
(ties: the centre of the tied settings, then the smaller LM weight and penalty) and
reports the test WER there as the headline, in ``TEST/dev_picked_wer``::

    %WER 5.10 [ 72 / 1411, 8 ins, 6 del, 58 sub ] TEST/wer_10_0.5
    # dev-picked: lmwt 10, wip 0.5 on DEV: %WER 4.80 [ ... ]
    # best on test (oracle): %WER 5.03 [ ... ] TEST/wer_9_0.0

and the figures (grids, pick, both WERs, edge warnings) in ``TEST/score/dev_picked.json``.
A pick on an edge of a swept axis (one with two values or more) means the optimum may lie
outside the grid: it is logged and recorded with the edge and a wider range to try.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import InputError
from asrtrain.decode.grid import lmwt_name, parse_setting, wip_name
from asrtrain.score.sweep import ScoreOptions, lowest, sweep

log = logging.getLogger("asrtrain.score")

TIE_RULE = ("fewest dev errors; ties: the tied setting nearest the centre of the tied ones "
            "(in grid steps), then the smaller LM weight, then the smaller penalty")


@dataclass(frozen=True)
class Grid:
    """The settings of a decode directory: name → (LM weight, penalty)."""

    settings: dict[str, tuple[float, float]]

    @property
    def lmwts(self) -> list[float]:
        return sorted({w for w, _ in self.settings.values()})

    @property
    def wips(self) -> list[float]:
        return sorted({p for _, p in self.settings.values()})

    def describe(self) -> str:
        return (f"lmwt {','.join(lmwt_name(w) for w in self.lmwts)}, "
                f"wip {','.join(wip_name(p) for p in self.wips)}")


def read_grid(decode_dir: Path) -> Grid:
    """The grid from ``hyp/<name>.txt``; every name must be ``<lmwt>`` or ``<lmwt>_<wip>``."""
    hyp_dir = decode_dir / "hyp"
    names = sorted(p.stem for p in hyp_dir.glob("*.txt")) if hyp_dir.is_dir() else []
    if not names:
        raise InputError("no hypotheses (expected hyp/<lmwt>.txt or hyp/<lmwt>_<wip>.txt)",
                         hyp_dir)
    settings = {}
    for name in names:
        setting = parse_setting(name)
        if setting is None:
            raise InputError(f"{name}.txt is not named <lmwt> or <lmwt>_<wip>: cannot pick a "
                             "setting on dev", hyp_dir)
        settings[name] = setting
    return Grid(settings)


def check_pair(test_dir: Path, dev_dir: Path) -> Grid:
    """Dev has a reference and the same grid as test; the grid, or a one-line refusal."""
    if dev_dir.resolve() == test_dir.resolve():
        raise InputError("--pick-on names the test directory itself: picking on test is the "
                         "oracle best_wer; give the dev decode", dev_dir)
    if not (dev_dir / "ref.txt").is_file():
        raise InputError(f"no reference text for --pick-on (decode dev {dev_dir} with --text; "
                         f"test is {test_dir})", dev_dir / "ref.txt")
    test, dev = read_grid(test_dir), read_grid(dev_dir)
    if set(test.settings) != set(dev.settings):
        raise InputError(f"dev {dev_dir} and test {test_dir} were decoded with different grids "
                         f"(dev: {dev.describe()}; test: {test.describe()}): decode both with "
                         "the same --lmwt and --wip")
    return test


def edge_warnings(grid: Grid, lmwt: float, wip: float) -> list[str]:
    """One message per swept axis whose edge holds the pick, with the way to widen it."""
    out = []
    for axis, value, values, option, fmt in (("LM weight", lmwt, grid.lmwts, "--lmwt", lmwt_name),
                                             ("penalty", wip, grid.wips, "--wip", wip_name)):
        if len(values) < 2 or values[0] < value < values[-1]:
            continue
        edge = "lowest" if value == values[0] else "highest"
        way = "below" if edge == "lowest" else "above"
        out.append(f"the dev pick {axis} {fmt(value)} is the {edge} swept "
                   f"({fmt(values[0])}..{fmt(values[-1])}): the optimum may lie outside the "
                   f"grid; widen {option} {way} {fmt(value)}")
    return out


def pick_on(test_dir: Path, dev_dir: Path, opts: ScoreOptions,
            ref: Path | None = None) -> dict[str, Any]:
    """Sweep dev and test, pick on dev, write ``dev_picked_wer`` and ``dev_picked.json``."""
    grid = check_pair(test_dir, dev_dir)
    # dev: the same normalisation; formats detected, speakers from beside its reference,
    # no bootstrap (its intervals are not reported)
    dev = sweep(dev_dir, replace(opts, ref_format="auto", hyp_format="auto", utt2spk=None,
                                 bootstrap=0, lm_text=None))
    test = sweep(test_dir, opts, ref)
    name = lowest({n: dev["weights"][n] for n in test["weights"]})
    lmwt, wip = grid.settings[name]
    warnings = edge_warnings(grid, lmwt, wip)
    for text in warnings:
        log.warning("%s", text)
    summary = _summary(test_dir, dev_dir, grid, name, dev, test, warnings)
    write_text(test_dir / "dev_picked_wer", _report(summary))
    write_text(test_dir / "score" / "dev_picked.json", json.dumps(summary, indent=1) + "\n")
    log.info("dev-picked (%s): %s", name, summary["test_line"])
    return summary


def _summary(test_dir: Path, dev_dir: Path, grid: Grid, name: str, dev: dict[str, Any],
             test: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    lmwt, wip = grid.settings[name]
    oracle = test["best"]
    return {"test": str(test_dir), "dev": str(dev_dir),
            "grid": {"lmwt": [lmwt_name(w) for w in grid.lmwts],
                     "wip": [wip_name(p) for p in grid.wips]},
            "tie_rule": TIE_RULE,
            "picked": {"name": name, "lmwt": lmwt_name(lmwt), "wip": wip_name(wip)},
            "test_wer": test["weights"][name]["kaldi_wer"],
            "test_line": test["weights"][name]["kaldi_line"],
            "test_file": str(test_dir / f"wer_{name}"),
            "dev_wer": dev["weights"][name]["kaldi_wer"],
            "dev_line": dev["weights"][name]["kaldi_line"],
            "oracle": {"label": "best on test (oracle)", "name": oracle,
                       "wer": test["weights"][oracle]["kaldi_wer"],
                       "line": test["weights"][oracle]["kaldi_line"],
                       "file": str(test_dir / f"wer_{oracle}")},
            "warnings": warnings,
            "lm_text_vocabulary": test["weights"][name].get("lm_text_vocabulary")}


def _report(s: dict[str, Any]) -> str:
    """``dev_picked_wer``: the headline first, in ``best_wer``'s form (line, then file)."""
    p = s["picked"]
    lines = [f"{s['test_line']} {s['test_file']}",
             f"# dev-picked: lmwt {p['lmwt']}, wip {p['wip']} on {s['dev']}: {s['dev_line']}",
             f"# {s['oracle']['label']}: {s['oracle']['line']} {s['oracle']['file']}"]
    if s.get("lm_text_vocabulary"):
        lines.append(f"# {s['lm_text_vocabulary']['line']}")
    lines += [f"# warning: {w}" for w in s["warnings"]]
    return "\n".join(lines) + "\n"
