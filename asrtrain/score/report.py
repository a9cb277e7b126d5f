"""Reports in sclite's spirit, the Kaldi ``%WER`` line, and ``wer.json``.

Files written into OUT, each atomically, ``wer.json`` last (its presence means the set
is complete):

* ``summary.txt`` -- per-speaker and total table (sentences, words, correct, sub, del,
  ins, err, sentence errors; counts and percentages), subsets, bootstrap interval,
  what was filtered, missing or left out;
* ``alignments.pra`` -- per utterance ``id:``/``Scores:``/``REF:``/``HYP:``/``Eval:``
  blocks as in sclite's ``pra`` (correct words lower case, errors upper case);
* ``confusions.txt`` -- most frequent substitutions, deletions, insertions;
* ``wer`` -- Kaldi ``compute-wer`` lines (unit-cost Levenshtein; see ``align.py``);
* ``wer.json`` -- all of the above as numbers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrtrain.core.atomic import write_text
from asrtrain.score.align import CORRECT, DELETION, INSERTION, SUBSTITUTION, Counts
from asrtrain.score.bootstrap import Interval, bootstrap_wer
from asrtrain.score.scorer import ScoreResult, UttScore
from asrtrain.score.vocab import VocabSplit


def kaldi_lines(c: Counts, missing: int = 0) -> str:
    """The three lines of Kaldi's ``compute-wer``."""
    wer = 100.0 * c.err / c.words if c.words else (0.0 if c.err == 0 else float("inf"))
    ser = 100.0 * c.sent_err / c.sent if c.sent else 0.0
    return (f"%WER {wer:.2f} [ {c.err} / {c.words}, {c.ins} ins, {c.dele} del, {c.sub} sub ]\n"
            f"%SER {ser:.2f} [ {c.sent_err} / {c.sent} ]\n"
            f"Scored {c.sent} sentences, {missing} not present in hyp.\n")


def _pct(n: int, d: int) -> str:
    return f"{100.0 * n / d:6.1f}" if d else f"{0.0 if n == 0 else float('inf'):6.1f}"


def summary_table(rows: Sequence[tuple[str, Counts]], total: Counts, title: str) -> str:
    """sclite's ``sum``/``rsum`` table: counts, then percentages of reference words."""
    w = max([len("SPKR"), len("Sum/Avg")] + [len(r[0]) for r in rows])
    head = (f"| {'SPKR':<{w}} | # Snt  # Wrd | {'Corr':>6} {'Sub':>6} {'Del':>6} {'Ins':>6} "
            f"{'Err':>6} {'S.Err':>6} |")
    rule = "|" + "-" * (len(head) - 2) + "|"
    lines = [title, rule, head, rule]

    def fmt(name: str, c: Counts) -> list[str]:
        counts = (f"| {name:<{w}} | {c.sent:5d} {c.words:6d} | {c.cor:6d} {c.sub:6d} "
                  f"{c.dele:6d} {c.ins:6d} {c.err:6d} {c.sent_err:6d} |")
        pct = (f"| {'':<{w}} | {'':5} {'':6} | {_pct(c.cor, c.words)} {_pct(c.sub, c.words)} "
               f"{_pct(c.dele, c.words)} {_pct(c.ins, c.words)} {_pct(c.err, c.words)} "
               f"{_pct(c.sent_err, c.sent)} |")
        return [counts, pct]

    for name, c in rows:
        lines += fmt(name, c)
    lines.append(rule.replace("-", "="))
    lines += fmt("Sum/Avg", total)
    lines.append(rule)
    return "\n".join(lines) + "\n"


def pra_block(u: UttScore) -> str:
    """One utterance in sclite's ``pra`` layout."""
    refs, hyps, evals = [], [], []
    for p in u.pairs:
        r = p.ref.display if p.ref is not None else ""
        h = p.hyp.display if p.hyp is not None else ""
        if p.op == CORRECT:
            r, h = r.lower(), h.lower()
        width = max(len(r), len(h), 1)
        refs.append((r or "*" * width).ljust(width))
        hyps.append((h or ("*" * width if p.op != CORRECT else "")).ljust(width))
        evals.append(("" if p.op == CORRECT else p.op).ljust(width))
    c = u.counts
    note = "  (no hypothesis)" if u.missing_hyp else ""
    return (f"id: ({u.utt.id})\nSpeaker: {u.utt.speaker}{note}\n"
            f"Scores: (#C #S #D #I) {c.cor} {c.sub} {c.dele} {c.ins}\n"
            f"REF:  {' '.join(refs)}\nHYP:  {' '.join(hyps)}\nEval: {' '.join(evals)}\n\n")


@dataclass
class Confusions:
    sub: Counter[tuple[str, str]]
    dele: Counter[str]
    ins: Counter[str]


def confusions(utts: Sequence[UttScore]) -> Confusions:
    sub: Counter[tuple[str, str]] = Counter()
    dele: Counter[str] = Counter()
    ins: Counter[str] = Counter()
    for u in utts:
        for p in u.pairs:
            if p.op == SUBSTITUTION:
                assert p.ref is not None and p.hyp is not None
                sub[(p.ref.display, p.hyp.display)] += 1
            elif p.op == DELETION and p.ref is not None:
                dele[p.ref.display] += 1
            elif p.op == INSERTION and p.hyp is not None:
                ins[p.hyp.display] += 1
    return Confusions(sub, dele, ins)


def confusions_text(conf: Confusions, top: int) -> str:
    out = [f"MOST FREQUENT SUBSTITUTIONS (top {top}, of {sum(conf.sub.values())})"]
    out += [f"{n:6d}  {r}  ==>  {h}" for (r, h), n in conf.sub.most_common(top)]
    out += ["", f"MOST FREQUENT DELETIONS (top {top}, of {sum(conf.dele.values())})"]
    out += [f"{n:6d}  {w}" for w, n in conf.dele.most_common(top)]
    out += ["", f"MOST FREQUENT INSERTIONS (top {top}, of {sum(conf.ins.values())})"]
    out += [f"{n:6d}  {w}" for w, n in conf.ins.most_common(top)]
    return "\n".join(out) + "\n"


def interval_for(res: ScoreResult, utts: Sequence[UttScore], replications: int, unit: str,
                 seed: int) -> Interval:
    """Bootstrap over utterances, or over speakers (their utterances kept together)."""
    if unit == "speaker":
        groups: dict[str, Counts] = {}
        for u in utts:
            groups.setdefault(u.utt.speaker, Counts())
            groups[u.utt.speaker] += u.counts
        errs = [c.err for c in groups.values()]
        words = [c.words for c in groups.values()]
    else:
        errs = [u.counts.err for u in utts]
        words = [u.counts.words for u in utts]
    return bootstrap_wer(errs, words, replications, seed=seed, unit=unit)


def write_reports(res: ScoreResult, out: Path, subsets: Sequence[tuple[str, str]] = (),
                  bootstrap: int = 1000, bootstrap_unit: str = "utterance", seed: int = 0,
                  top: int = 20, options: dict[str, Any] | None = None,
                  vocab: VocabSplit | None = None) -> dict[str, Any]:
    """Write every report into ``out``; returns the ``wer.json`` content. ``vocab``: the
    reference words split by the LM text's vocabulary (``score --lm-text``)."""
    out.mkdir(parents=True, exist_ok=True)
    total, ktotal = res.total(), res.kaldi_total()
    spk = res.by_speaker()
    groups: list[tuple[str, list[UttScore]]] = [("all", res.utts)]
    groups += [(name, res.subset(pat)) for name, pat in subsets]
    intervals = {name: interval_for(res, utts, bootstrap, bootstrap_unit, seed)
                 for name, utts in groups} if bootstrap > 0 else {}

    text = [summary_table(list(spk.items()), total, "SYSTEM SUMMARY by SPEAKER (counts, "
                                                    "then percent of reference words)")]
    if subsets:
        rows = [(f"{name} ({pat})", res.total(res.subset(pat))) for name, pat in subsets]
        text.append(summary_table(rows, total, "SUBSETS"))
    text.append("sclite-style (sub 4, ins/del 3): " + _wer_line(total))
    text.append("Kaldi compute-wer (Levenshtein):  " + kaldi_lines(ktotal).splitlines()[0] + "\n")
    for name, iv in intervals.items():
        text.append(f"bootstrap {name}: WER {iv.wer:.2f}%, {int(iv.level * 100)}% interval "
                    f"[{iv.low:.2f}, {iv.high:.2f}] ({iv.replications} resamplings of "
                    f"{iv.unit}s)\n")
    if vocab is not None:
        text.append(vocab.line() + "\n")
    text.append(_accounting(res))
    write_text(out / "summary.txt", "".join(text))
    write_text(out / "alignments.pra", "".join(pra_block(u) for u in res.utts))
    write_text(out / "confusions.txt", confusions_text(confusions(res.utts), top))
    write_text(out / "wer", kaldi_lines(ktotal, len(res.missing_hyp)))
    conf = confusions(res.utts)
    data: dict[str, Any] = {
        "wer": round(total.wer, 4) if total.words else None,
        "total": total.as_dict(),
        "kaldi": ktotal.as_dict(),
        "kaldi_line": kaldi_lines(ktotal).splitlines()[0],
        "sclite_line": _wer_line(total).strip(),
        "speakers": {k: v.as_dict() for k, v in spk.items()},
        "subsets": {name: {"pattern": pat, **res.total(res.subset(pat)).as_dict(),
                           "kaldi": res.kaldi_total(res.subset(pat)).as_dict()}
                    for name, pat in subsets},
        "bootstrap": {k: v.as_dict() for k, v in intervals.items()},
        "missing_hyp": {"count": len(res.missing_hyp), "utterances": res.missing_hyp},
        "extra_hyp": {"count": len(res.extra_hyp), "words": sum(res.extra_hyp.values()),
                      "utterances": res.extra_hyp},
        "filtered_tokens": res.filtered,
        "ignored_hyp_words": res.ignored_words,
        "formats": {"ref": res.ref_format, "hyp": res.hyp_format},
        "top_substitutions": [[r, h, n] for (r, h), n in conf.sub.most_common(top)],
        "top_deletions": [[w, n] for w, n in conf.dele.most_common(top)],
        "top_insertions": [[w, n] for w, n in conf.ins.most_common(top)],
        "options": options or {},
    }
    if vocab is not None:
        data["lm_text_vocabulary"] = vocab.as_dict()
    write_text(out / "wer.json", json.dumps(data, indent=1, sort_keys=False) + "\n")
    return data


def _wer_line(c: Counts) -> str:
    return (f"%WER {c.wer:.2f} [ {c.err} / {c.words}, {c.ins} ins, {c.dele} del, "
            f"{c.sub} sub ]\n")


def _accounting(res: ScoreResult) -> str:
    """What was not scored as written: never silent."""
    lines = []
    if res.missing_hyp:
        lines.append(f"{len(res.missing_hyp)} reference utterance(s) had no hypothesis and "
                     f"were scored as all deletions (first: {res.missing_hyp[0]})")
    if res.extra_hyp:
        lines.append(f"{len(res.extra_hyp)} hypothesis utterance(s) without reference were "
                     f"left out ({sum(res.extra_hyp.values())} words)")
    if res.ignored_words:
        lines.append(f"{res.ignored_words} hypothesis word(s) fell in "
                     "IGNORE_TIME_SEGMENT_IN_SCORING segments and were dropped")
    if res.filtered:
        tokens = ", ".join(f"{k} {v}" for k, v in res.filtered.items())
        lines.append(f"filtered tokens (both sides): {tokens}")
    return ("\n".join(lines) + "\n") if lines else "nothing filtered, missing or left out\n"
