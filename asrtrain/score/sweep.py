"""Scoring end to end: one REF/HYP pair, or every setting of a decode directory.

``sweep`` reads ``DECODE_DIR/ref.txt`` (or ``--ref``) and ``DECODE_DIR/hyp/<name>.txt``
(contract 7; a name is ``<lmwt>`` or ``<lmwt>_<wip>``, ``decode/grid.py``), writes
Kaldi's ``DECODE_DIR/wer_<name>`` for each (``compute-wer`` lines) and
``DECODE_DIR/best_wer`` (the lowest ``%WER`` line followed by its file, as
``utils/best_wer.sh`` prints it; ties go to the centre of the tied settings, see
``lowest``): the best on this set itself, an oracle figure when the set is the test set
(``pick.py`` picks on dev instead). The full reports of each setting go to
``DECODE_DIR/score/<name>/``, the summary to ``DECODE_DIR/score/sweep.json``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_text
from asrtrain.decode.grid import parse_setting
from asrtrain.score.normalize import DEFAULT_FILTER, Normalizer, load_glm
from asrtrain.score.report import kaldi_lines, write_reports
from asrtrain.score.scorer import check_speakers, load_inputs, score_inputs
from asrtrain.score.vocab import read_vocab, split_by_vocab

log = logging.getLogger("asrtrain.score")


@dataclass
class ScoreOptions:
    """Everything that changes the numbers, in one place (logged into wer.json)."""

    glm: Path | None = None
    fragments: str = "error"
    optional_deletable: bool = True
    filter_regex: str | None = DEFAULT_FILTER
    split_hyphens: bool = False
    extra_hyp: str = "error"
    ref_format: str = "auto"
    hyp_format: str = "auto"
    utt2spk: Path | None = None
    subsets: Sequence[tuple[str, str]] = ()
    bootstrap: int = 1000
    bootstrap_unit: str = "utterance"
    seed: int = 0
    lm_text: Path | None = None   # the reports split the reference words by its vocabulary (vocab.py)

    def normalizer(self) -> Normalizer:
        glm = load_glm(self.glm) if self.glm is not None else None
        return Normalizer(glm, self.fragments, self.optional_deletable, self.filter_regex,
                          self.split_hyphens)

    def as_dict(self) -> dict[str, Any]:
        return {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()
                if k != "subsets"} | {"subsets": [list(s) for s in self.subsets]}


def parse_subsets(specs: Sequence[str]) -> list[tuple[str, str]]:
    """``NAME=GLOB`` pairs (``swbd=sw_*``)."""
    out = []
    for spec in specs:
        name, sep, pat = spec.partition("=")
        if not sep or not name or not pat:
            raise InputError(f"--subset {spec!r}: expected NAME=PATTERN, e.g. swbd='sw_*'")
        out.append((name, pat))
    return out


def score_files(ref: Path, hyp: Path, out: Path, opts: ScoreOptions) -> dict[str, Any]:
    """Score HYP against REF and write the reports into OUT; returns wer.json's content."""
    normalizer = opts.normalizer()
    inputs = load_inputs(ref, hyp, opts.ref_format, opts.hyp_format, opts.utt2spk, normalizer)
    if opts.bootstrap > 0:
        check_speakers(inputs, opts.bootstrap_unit, ref)
    res = score_inputs(inputs, normalizer, opts.extra_hyp, hyp)
    vocab = split_by_vocab((u.pairs for u in res.utts), read_vocab(opts.lm_text), str(opts.lm_text)) \
        if opts.lm_text is not None else None
    data = write_reports(res, out, opts.subsets, opts.bootstrap, opts.bootstrap_unit,
                         opts.seed, options={"ref": str(ref), "hyp": str(hyp),
                                             **opts.as_dict()}, vocab=vocab)
    log.info("%s: %s", hyp, data["kaldi_line"])
    return data


def _weight_key(stem: str) -> tuple[float, float, str]:
    """Grid order (LM weight, then penalty); other names after, by their leading number."""
    setting = parse_setting(stem)
    if setting is not None:
        return (*setting, stem)
    m = re.match(r"^[-+]?\d+(\.\d+)?", stem)
    return (float(m.group(0)) if m else float("inf"), float("inf"), stem)


def lowest(results: dict[str, Any]) -> str:
    """The name with the fewest errors (a set without words last). Ties go to the centre
    of the tied settings (in grid steps: the one nearest their mean), then to the first
    in grid order (``results`` is in that order): where a small dev set ties over a range
    of LM weights, the middle of that plateau is the setting farthest from where errors
    start, while its lowest weight sits on the plateau's edge."""
    def errors(name: str) -> float:
        r = results[name]
        return float("inf") if r["kaldi_wer"] is None else r["kaldi_errors"]

    fewest = min(errors(n) for n in results)
    tied = [n for n in results if errors(n) == fewest]
    return tied[0] if len(tied) == 1 else plateau_centre(tied, list(results))


def plateau_centre(tied: list[str], names: list[str]) -> str:
    """The tied setting nearest the mean of the tied ones, in grid steps (first on ties)."""
    parsed = {n: parse_setting(n) for n in names}
    grid = {n: s for n, s in parsed.items() if s is not None}
    if len(grid) != len(parsed):
        return tied[0]
    lmwts = sorted({w for w, _ in grid.values()})
    wips = sorted({p for _, p in grid.values()})

    def steps(name: str) -> tuple[int, int]:
        w, p = grid[name]
        return lmwts.index(w), wips.index(p)

    coords = [steps(n) for n in tied]
    mean = [sum(c[k] for c in coords) / len(coords) for k in (0, 1)]
    return min(tied, key=lambda n: (steps(n)[0] - mean[0]) ** 2 + (steps(n)[1] - mean[1]) ** 2)


def _remove_stale_wer(decode_dir: Path, scored: set[str]) -> None:
    """Drop ``wer_<setting>`` files of an earlier sweep whose hypotheses are gone."""
    for path in sorted(decode_dir.glob("wer_*")):
        name = path.name.removeprefix("wer_")
        if name not in scored and parse_setting(name) is not None:
            log.warning("removing %s of an earlier sweep (no hyp/%s.txt now)", path, name)
            path.unlink()


def sweep(decode_dir: Path, opts: ScoreOptions, ref: Path | None = None) -> dict[str, Any]:
    """Score every ``hyp/<name>.txt`` of a decode directory; pick the best setting."""
    ref = ref if ref is not None else decode_dir / "ref.txt"
    if not ref.is_file():
        raise InputError("no reference: decode was run without --text; pass --ref FILE",
                         ref)
    hyp_dir = decode_dir / "hyp"
    hyps = sorted(hyp_dir.glob("*.txt"), key=lambda p: _weight_key(p.stem)) \
        if hyp_dir.is_dir() else []
    if not hyps:
        raise InputError("no hypotheses (expected hyp/<lmwt>.txt or hyp/<lmwt>_<wip>.txt)",
                         hyp_dir)
    results: dict[str, Any] = {}
    for hyp in hyps:
        name = hyp.stem
        data = score_files(ref, hyp, decode_dir / "score" / name, opts)
        k = data["kaldi"]
        results[name] = {"kaldi_wer": k["wer"], "kaldi_errors": k["errors"],
                         "sclite_wer": data["wer"], "kaldi_line": data["kaldi_line"]}
        if "lm_text_vocabulary" in data:
            results[name]["lm_text_vocabulary"] = data["lm_text_vocabulary"]
        write_text(decode_dir / f"wer_{name}", read_text(decode_dir / "score" / name / "wer"))
    _remove_stale_wer(decode_dir, set(results))
    best = lowest(results)
    line = results[best]["kaldi_line"]
    write_text(decode_dir / "best_wer", f"{line} {decode_dir / f'wer_{best}'}\n")
    summary = {"best": best, "best_wer": results[best]["kaldi_wer"],
               "ref": str(ref), "weights": results}
    write_text(decode_dir / "score" / "sweep.json", json.dumps(summary, indent=1) + "\n")
    log.info("best: %s", line)
    return summary


__all__ = ["ScoreOptions", "kaldi_lines", "parse_subsets", "score_files", "sweep"]
