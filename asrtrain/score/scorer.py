"""Score a reference against a hypothesis: load, normalise, align, count.

Policy for mismatched inputs (documented in ``asrtrain score --help``):

* a reference utterance with no hypothesis is scored as all deletions and counted
  (``missing_hyp`` in the report and ``wer.json``);
* a hypothesis for an utterance the reference lacks is an error naming it, unless
  ``extra_hyp="ignore"``: then its words are left out and counted (``extra_hyp``);
* CTM words inside STM ``IGNORE_TIME_SEGMENT_IN_SCORING`` segments are dropped and
  counted, as sclite does.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.data.kaldi_dir import read_utt2spk
from asrtrain.score import formats
from asrtrain.score.align import Counts, Pair, align, count, kaldi_counts
from asrtrain.score.normalize import Normalizer

log = logging.getLogger("asrtrain.score")


@dataclass
class UttScore:
    """One utterance: its sclite-style alignment and counts, and Kaldi's counts."""

    utt: formats.Utterance
    pairs: list[Pair]
    counts: Counts
    kaldi: Counts
    missing_hyp: bool = False


@dataclass
class Inputs:
    """A reference and the hypotheses keyed by its utterance ids."""

    refs: list[formats.Utterance]
    hyps: dict[str, list[str]]
    ref_format: str
    hyp_format: str
    ignored_words: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    hyp_pre_mapped: bool = False        # the GLM was applied while grouping CTM words
    speakers_from: str = "ids"          # "utt2spk" (its path), "stm", or "ids" (guessed from them)


@dataclass
class ScoreResult:
    """Everything the reports need."""

    utts: list[UttScore]
    filtered: dict[str, int]
    ignored_words: int
    extra_hyp: dict[str, int]
    ref_format: str
    hyp_format: str

    @property
    def missing_hyp(self) -> list[str]:
        return [u.utt.id for u in self.utts if u.missing_hyp]

    def total(self, utts: Sequence[UttScore] | None = None) -> Counts:
        c = Counts()
        for u in self.utts if utts is None else utts:
            c += u.counts
        return c

    def kaldi_total(self, utts: Sequence[UttScore] | None = None) -> Counts:
        c = Counts()
        for u in self.utts if utts is None else utts:
            c += u.kaldi
        return c

    def by_speaker(self) -> dict[str, Counts]:
        out: dict[str, Counts] = {}
        for u in self.utts:
            out.setdefault(u.utt.speaker, Counts())
            out[u.utt.speaker] += u.counts
        return dict(sorted(out.items()))

    def subset(self, pattern: str) -> list[UttScore]:
        """Utterances whose id (or STM file name) matches a shell pattern."""
        return [u for u in self.utts if fnmatch.fnmatchcase(u.utt.id, pattern)
                or (u.utt.file and fnmatch.fnmatchcase(u.utt.file, pattern))]


def load_inputs(ref: Path, hyp: Path, ref_format: str = "auto", hyp_format: str = "auto",
                utt2spk: Path | None = None, normalizer: Normalizer | None = None) -> Inputs:
    """Read REF (text or STM) and HYP (text or CTM) and key the hypotheses by utterance."""
    rf = formats.sniff_format(ref) if ref_format == "auto" else ref_format
    hf = formats.sniff_format(hyp) if hyp_format == "auto" else hyp_format
    if rf not in ("text", "stm"):
        raise InputError(f"a reference must be Kaldi text or STM, this looks like {rf}", ref)
    if hf not in ("text", "ctm"):
        raise InputError(f"a hypothesis must be Kaldi text or CTM, this looks like {hf}", hyp)
    if rf == "stm":
        if hf != "ctm":
            raise InputError("an STM reference needs a CTM hypothesis (words are placed in "
                             "segments by time)", hyp)
        refs = formats.read_stm(ref)
        rewrite = None
        if normalizer is not None and normalizer.glm is not None:
            # map CTM words before placing them in segments, as csrfilt + sclite do
            def rewrite(w: str) -> str:
                return normalizer.rewrite(w, ("ctm", "hyp"))
        grouped = formats.group_ctm_by_stm(formats.read_ctm(hyp), refs, rewrite)
        refs = [u for u in refs if not u.ignore]
        return Inputs(refs, grouped.hyps, rf, hf, grouped.ignored_words, grouped.extra,
                      hyp_pre_mapped=rewrite is not None, speakers_from="stm")
    if utt2spk is None and (ref.parent / "utt2spk").is_file():
        utt2spk = ref.parent / "utt2spk"
    spk = read_utt2spk(utt2spk) if utt2spk is not None else None
    refs = formats.read_text(ref, spk)
    if hf == "ctm":
        hyps = formats.group_ctm_by_utt(formats.read_ctm(hyp)).hyps
    else:
        hyps = {u.id: u.words for u in formats.read_text(hyp)}
    known = {u.id for u in refs}
    extra = {k: len(v) for k, v in hyps.items() if k not in known}
    return Inputs(refs, {k: v for k, v in hyps.items() if k in known}, rf, hf, 0, extra,
                  speakers_from=str(utt2spk) if utt2spk is not None else "ids")


def check_speakers(inputs: Inputs, unit: str, ref: Path) -> None:
    """Refuse to resample speakers that are not there: no utt2spk, and ids that name no
    speaker (one utterance each) would make a speaker bootstrap resample utterances."""
    if unit != "speaker" or inputs.speakers_from != "ids" or len(inputs.refs) < 2:
        return
    if len({u.speaker for u in inputs.refs}) == len(inputs.refs):
        raise InputError("--bootstrap-unit speaker: no utt2spk beside the reference (or --utt2spk), "
                         f"and its {len(inputs.refs)} utterance ids name {len(inputs.refs)} speakers, "
                         "one each: give the speakers", ref)


def score_inputs(inputs: Inputs, normalizer: Normalizer, extra_hyp: str = "error",
                 hyp_path: Path | None = None) -> ScoreResult:
    """Align every reference utterance with its hypothesis."""
    if inputs.extra and extra_hyp == "error":
        first = sorted(inputs.extra)[0]
        more = f" (and {len(inputs.extra) - 1} more)" if len(inputs.extra) > 1 else ""
        raise InputError(f"hypothesis for {first!r}{more} which the reference lacks; "
                         "pass --extra-hyp ignore to leave such words out and count them",
                         hyp_path)
    # GLM rule sets are chosen by input type and purpose, as csrfilt's -i/-t; a Kaldi
    # text counts as trn and also as the STM (reference) or CTM (hypothesis) it stands for
    rkind = ("stm", "ref") if inputs.ref_format == "stm" else ("trn", "stm", "ref")
    hkind = ("ctm", "hyp") if inputs.hyp_format == "ctm" else ("trn", "ctm", "hyp")
    utts: list[UttScore] = []
    for u in inputs.refs:
        hyp_words = inputs.hyps.get(u.id)
        missing = hyp_words is None
        hw = hyp_words or []
        ref_net = normalizer.network(u.words, rkind, u.id)
        pre = inputs.hyp_pre_mapped
        hyp_net = normalizer.network(hw, hkind, u.id, pre_mapped=pre)
        pairs = align(ref_net, hyp_net)
        kc = kaldi_counts(normalizer.flat(u.words, rkind),
                          normalizer.flat(hw, hkind, pre_mapped=pre))
        utts.append(UttScore(u, pairs, count(pairs), kc, missing))
    res = ScoreResult(utts, dict(sorted(normalizer.filtered.items())), inputs.ignored_words,
                      dict(sorted(inputs.extra.items())), inputs.ref_format, inputs.hyp_format)
    if res.missing_hyp:
        log.warning("%d reference utterance(s) have no hypothesis (scored as deletions), "
                    "first %s", len(res.missing_hyp), res.missing_hyp[0])
    if res.extra_hyp:
        log.warning("%d hypothesis utterance(s) without reference left out (%d words)",
                    len(res.extra_hyp), sum(res.extra_hyp.values()))
    return res
