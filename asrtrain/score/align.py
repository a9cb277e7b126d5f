"""Word alignment exactly as NIST sclite does it, and Kaldi's Levenshtein counts.

Two aligners live here because the two published conventions differ:

* :func:`align` reproduces sclite's ``Network_dpalign`` (sctk ``net_dp.c`` with
  ``wwd_WORD`` from ``word.c``): a dynamic programme over word *networks* (so the
  alternations ``{ a / b }`` a GLM produces can be aligned), with costs correct 0,
  substitution 4, insertion/deletion 3, insertion/deletion of an optionally deletable
  word 2, of the null word ``@`` 0.001. Ties prefer a substitution (or match), then a
  deletion, then an insertion, and the back-trace starts from the cheapest pair of
  final arcs -- the same order sclite uses, so the counts agree with sclite to the word
  (``tests/score/test_sclite_agreement.py``). With these weights a pair
  insertion+deletion (6) is preferred to two substitutions (8): the totals can differ
  from a plain Levenshtein alignment in the split, and occasionally in the sum.
* :func:`kaldi_counts` is Kaldi's ``compute-wer``: unit-cost Levenshtein through
  ``kaldialign.edit_distance``, used for the ``%WER`` line of ``wer_<lmwt>`` files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

SUB_COST = 4.0
INDEL_COST = 3.0
OPT_DEL_COST = 2.0
NULL_COST = 0.001
NULL_SUB_COST = 1.0
NULL_WORD = "@"

CORRECT, SUBSTITUTION, DELETION, INSERTION = "C", "S", "D", "I"


@dataclass(frozen=True)
class Word:
    """One word of a network: its text, and sclite's flags for it."""

    text: str
    opt_del: bool = False      # written "(WORD)": deleting it costs nothing in the score
    frag: bool = False         # fragment "AB-" / "-AB" scored with --fragments correct

    @property
    def null(self) -> bool:
        return self.text == NULL_WORD

    @property
    def display(self) -> str:
        return f"({self.text})" if self.opt_del else self.text


@dataclass
class Net:
    """A word network: arc 0 is the null head; ``preds[i]`` lists the arcs entering arc i."""

    words: list[Word | None] = field(default_factory=lambda: [None])
    preds: list[list[int]] = field(default_factory=lambda: [[]])
    finals: list[int] = field(default_factory=lambda: [0])

    def add(self, word: Word, preds: list[int]) -> int:
        self.words.append(word)
        self.preds.append(list(preds))
        return len(self.words) - 1

    @property
    def linear(self) -> bool:
        return all(len(p) <= 1 for p in self.preds) and len(self.finals) == 1

    @classmethod
    def from_words(cls, words: Sequence[Word]) -> Net:
        net = cls()
        last = 0
        for w in words:
            last = net.add(w, [last])
        net.finals = [last]
        return net


@dataclass(frozen=True)
class Pair:
    """One step of an alignment: reference word, hypothesis word, and the verdict."""

    ref: Word | None
    hyp: Word | None
    op: str


def words_equal(w1: Word, w2: Word) -> bool:
    """sclite's ``equal_WORD2``: exact, or by prefix/suffix when either is a fragment."""
    a, b = w1.text, w2.text
    if w1.frag or w2.frag:
        la, lb = len(a), len(b)
        if la > 1 and a[0] == "-":
            return lb >= la - 1 and b[lb - (la - 1):] == a[1:]
        if la > 1 and a[-1] == "-":
            return b[:la - 1] == a[:-1]
        if lb > 1 and b[0] == "-":
            return la >= lb - 1 and a[la - (lb - 1):] == b[1:]
        if lb > 1 and b[-1] == "-":
            return a[:lb - 1] == b[:-1]
    return a == b


def word_cost(ref: Word | None, hyp: Word | None) -> float:
    """sclite's ``wwd_WORD`` cost of pairing two words (None = the empty side)."""
    if hyp is None:
        assert ref is not None
        if ref.null:
            return NULL_COST
        return OPT_DEL_COST if ref.opt_del else INDEL_COST
    if ref is None:
        if hyp.null:
            return NULL_COST
        return OPT_DEL_COST if hyp.opt_del else INDEL_COST
    if ref.null and hyp.null:
        return NULL_SUB_COST
    return 0.0 if words_equal(ref, hyp) else SUB_COST


def align(ref: Net, hyp: Net) -> list[Pair]:
    """Align two networks with sclite's costs and tie-breaking; nulls are dropped."""
    na, nb = len(ref.words), len(hyp.words)
    rw, hw = ref.words, hyp.words
    big = 1e18
    cost = [[0.0] * nb for _ in range(na)]
    back = [[(-1, -1)] * nb for _ in range(na)]
    for b in range(1, nb):
        best, arg = big, -1
        for p in hyp.preds[b]:
            if cost[0][p] < best:
                best, arg = cost[0][p], p
        cost[0][b] = best + word_cost(None, hw[b])
        back[0][b] = (0, arg)
    for a in range(1, na):
        best, arg = big, -1
        for p in ref.preds[a]:
            if cost[p][0] < best:
                best, arg = cost[p][0], p
        cost[a][0] = best + word_cost(rw[a], None)
        back[a][0] = (arg, 0)
    del_costs = [word_cost(rw[a], None) if a else 0.0 for a in range(na)]
    ins_costs = [word_cost(None, hw[b]) if b else 0.0 for b in range(nb)]
    for a in range(1, na):
        ra = rw[a]
        pa_list = ref.preds[a]
        row = cost[a]
        brow = back[a]
        for b in range(1, nb):
            pb_list = hyp.preds[b]
            ins, ins_b = big, -1
            for p in pb_list:
                if row[p] < ins:
                    ins, ins_b = row[p], p
            dl, del_a = big, -1
            for p in pa_list:
                if cost[p][b] < dl:
                    dl, del_a = cost[p][b], p
            sb, sub_a, sub_b = big, -1, -1
            for p in pa_list:
                prow = cost[p]
                for q in pb_list:
                    if prow[q] < sb:
                        sb, sub_a, sub_b = prow[q], p, q
            sb += word_cost(ra, hw[b])
            dl += del_costs[a]
            ins += ins_costs[b]
            if sb <= dl and sb <= ins:
                row[b], brow[b] = sb, (sub_a, sub_b)
            elif dl < ins:
                row[b], brow[b] = dl, (del_a, b)
            else:
                row[b], brow[b] = ins, (a, ins_b)
    best, a, b = big, 0, 0
    for fa in ref.finals:
        for fb in hyp.finals:
            if cost[fa][fb] < best:
                best, a, b = cost[fa][fb], fa, fb
    return _backtrace(ref, hyp, back, a, b)


def _backtrace(ref: Net, hyp: Net, back: list[list[tuple[int, int]]], a: int, b: int
               ) -> list[Pair]:
    out: list[Pair] = []
    while a > 0 or b > 0:
        pa, pb = back[a][b]
        if a == pa:                                  # insertion
            w = hyp.words[b]
            assert w is not None
            if not w.null:
                out.append(Pair(None, w, CORRECT if w.opt_del else INSERTION))
        elif b == pb:                                # deletion
            w = ref.words[a]
            assert w is not None
            if not w.null:
                out.append(Pair(w, None, CORRECT if w.opt_del else DELETION))
        else:
            r, h = ref.words[a], hyp.words[b]
            assert r is not None and h is not None
            if not (r.null and h.null):
                out.append(Pair(r, h, CORRECT if words_equal(r, h) else SUBSTITUTION))
        a, b = pa, pb
    out.reverse()
    return out


@dataclass
class Counts:
    """Word counts of one utterance or a sum of them (sclite's columns)."""

    sent: int = 0
    words: int = 0
    cor: int = 0
    sub: int = 0
    dele: int = 0
    ins: int = 0
    sent_err: int = 0

    @property
    def err(self) -> int:
        return self.sub + self.dele + self.ins

    @property
    def wer(self) -> float:
        """Percent word error rate; 0 errors over 0 words is 0, errors over 0 words inf."""
        if self.words == 0:
            return 0.0 if self.err == 0 else float("inf")
        return 100.0 * self.err / self.words

    def __iadd__(self, other: Counts) -> Counts:
        self.sent += other.sent
        self.words += other.words
        self.cor += other.cor
        self.sub += other.sub
        self.dele += other.dele
        self.ins += other.ins
        self.sent_err += other.sent_err
        return self

    def as_dict(self) -> dict[str, float | int | None]:
        return {"sentences": self.sent, "words": self.words, "correct": self.cor,
                "substitutions": self.sub, "deletions": self.dele, "insertions": self.ins,
                "errors": self.err, "sentence_errors": self.sent_err,
                "wer": round(self.wer, 4) if self.words else None}


def count(pairs: Sequence[Pair]) -> Counts:
    """sclite's per-utterance counts: words = correct + substituted + deleted."""
    c = Counts(sent=1)
    for p in pairs:
        if p.op == CORRECT:
            c.cor += 1
        elif p.op == SUBSTITUTION:
            c.sub += 1
        elif p.op == DELETION:
            c.dele += 1
        else:
            c.ins += 1
    c.words = c.cor + c.sub + c.dele
    c.sent_err = int(c.err > 0)
    return c


def kaldi_counts(ref: Sequence[str], hyp: Sequence[str]) -> Counts:
    """Kaldi ``compute-wer`` counts (unit-cost Levenshtein via kaldialign)."""
    import kaldialign

    d = kaldialign.edit_distance(list(ref), list(hyp))
    c = Counts(sent=1, words=len(ref), sub=int(d["sub"]), dele=int(d["del"]), ins=int(d["ins"]))
    c.cor = c.words - c.sub - c.dele
    c.sent_err = int(c.err > 0)
    return c
