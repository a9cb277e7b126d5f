"""STM/CTM scoring and GLM rules against sclite (+ csrfilt.sh) on the same files."""

from __future__ import annotations

import random
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from needs import missing
from sclite_util import run_sclite_pra, sctk_env

from asrtrain.score.normalize import Normalizer, load_glm
from asrtrain.score.scorer import load_inputs, score_inputs

VOCAB = ["a", "b", "c", "uh", "um", "i'm", "i", "am", "ok", "okay"]


def _random_stm_ctm(seed: int) -> tuple[str, str]:
    """Two files x two channels of non-overlapping segments, CTM words scattered in time
    (some before, between and after segments, some in an IGNORE segment)."""
    rng = random.Random(seed)
    stm, ctm = [], []
    for f in ("fa", "fb"):
        for ch in ("A", "B"):
            spk = f"{f}_{ch.lower()}"
            t = 0.0
            for s in range(12):
                t += rng.choice([0.0, 0.3, 1.0])
                dur = rng.uniform(0.5, 3.0)
                n = rng.randint(0, 6)
                words = [rng.choice(VOCAB) for _ in range(n)]
                if s == 5:
                    words = ["IGNORE_TIME_SEGMENT_IN_SCORING"]
                elif rng.random() < 0.2 and words:
                    words[rng.randrange(len(words))] = "(uh)"
                stm.append(f"{f} {ch} {spk} {t:.2f} {t + dur:.2f} <o,f0,male> {' '.join(words)}")
                # hypothesis words: the reference words edited, at times in and around
                hyp = [w.strip("()") for w in words if rng.random() > 0.2
                       and not w.startswith("IGNORE")]
                hyp += [rng.choice(VOCAB) for _ in range(rng.randint(0, 2))]
                if words and words[0].startswith("IGNORE"):
                    hyp = ["b", "c"]
                for w in hyp:
                    b = rng.uniform(t - 0.2, t + dur + 0.2)
                    ctm.append((f, ch, max(0.0, b), rng.uniform(0.05, 0.4), w))
                t += dur
    ctm.sort(key=lambda x: (x[0], x[1], x[2]))
    return ("\n".join(stm) + "\n",
            "".join(f"{f} {ch} {b:.3f} {d:.3f} {w}\n" for f, ch, b, d, w in ctm))


def _per_speaker(items: list[tuple[str, tuple[int, ...]]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for spk, c in items:
        out[spk] = [a + b for a, b in zip(out[spk], c, strict=True)]
    return dict(out)


def _ours(ref: Path, hyp: Path, norm: Normalizer) -> list[tuple[str, tuple[int, ...]]]:
    res = score_inputs(load_inputs(ref, hyp, normalizer=norm), norm)
    return [(u.utt.speaker, (u.counts.cor, u.counts.sub, u.counts.dele, u.counts.ins))
            for u in res.utts]


@pytest.mark.sclite
@pytest.mark.parametrize("seed", [11, 12, 13])
def test_stm_ctm_counts_equal_sclite(tmp_path: Path, sclite: str, seed: int) -> None:
    stm, ctm = _random_stm_ctm(seed)
    (tmp_path / "ref.stm").write_text(stm)
    (tmp_path / "hyp.ctm").write_text(ctm)
    theirs = run_sclite_pra(sclite, ["-r", "ref.stm", "stm", "-h", "hyp.ctm", "ctm", "-D"],
                            tmp_path)
    ours = _ours(tmp_path / "ref.stm", tmp_path / "hyp.ctm",
                 Normalizer(optional_deletable=True, filter_regex=None))
    # sclite numbers a speaker's segments in order: compare segment by segment
    by_spk_theirs: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    by_spk_ours: dict[str, list[tuple[int, ...]]] = defaultdict(list)
    for spk, _u, c in theirs:
        by_spk_theirs[spk].append(c)
    for spk, c in ours:
        by_spk_ours[spk].append(c)
    assert dict(by_spk_theirs) == dict(by_spk_ours)
    assert len(ours) == 4 * 11                    # the IGNORE segments are not scored


GLM = """;; test GLM in sclite's format
* name "test.glm"
* format = 'NIST1'
* copy_no_hit = 'T'
* case_sensitive = 'F'
UH => %HESITATION / [ ] __ [ ] ;; hesitation
UM => %HESITATION / [ ] __ [ ]
OKAY => OK / [ ] __ [ ]
;; INPUT_DEPENDENT_APPLICATION = "ctm"
I'M => {I'M / I AM} / [ ] __ [ ]
"""


def _csrfilt(sclite: str, glm: Path, kind: str, purpose: str, src: Path, dst: Path) -> None:
    csrfilt = Path(sclite).parent / "csrfilt.sh"
    if not csrfilt.is_file():
        missing("csrfilt.sh not found beside sclite (Debian sctk; make install installs it)")
    with open(src) as fin, open(dst, "w") as fout:
        subprocess.run(["sh", str(csrfilt), "-i", kind, "-t", purpose, str(glm)], stdin=fin,
                       stdout=fout, check=True, env=sctk_env(sclite), timeout=60)


@pytest.mark.sclite
@pytest.mark.parametrize("seed", [21, 22])
def test_glm_changes_counts_as_sclite_does(tmp_path: Path, sclite: str, seed: int) -> None:
    stm, ctm = _random_stm_ctm(seed)
    (tmp_path / "ref.stm").write_text(stm)
    (tmp_path / "hyp.ctm").write_text(ctm)
    glm = tmp_path / "test.glm"
    glm.write_text(GLM)
    _csrfilt(sclite, glm, "stm", "ref", tmp_path / "ref.stm", tmp_path / "ref.filt.stm")
    _csrfilt(sclite, glm, "ctm", "hyp", tmp_path / "hyp.ctm", tmp_path / "hyp.filt.ctm")
    assert "<ALT_BEGIN>" in (tmp_path / "hyp.filt.ctm").read_text()   # alternations made
    theirs = run_sclite_pra(sclite, ["-r", "ref.filt.stm", "stm", "-h", "hyp.filt.ctm", "ctm",
                                     "-D"], tmp_path)
    plain = run_sclite_pra(sclite, ["-r", "ref.stm", "stm", "-h", "hyp.ctm", "ctm", "-D"],
                           tmp_path)
    with_glm = _ours(tmp_path / "ref.stm", tmp_path / "hyp.ctm",
                     Normalizer(load_glm(glm), optional_deletable=True, filter_regex=None))
    without = _ours(tmp_path / "ref.stm", tmp_path / "hyp.ctm",
                    Normalizer(optional_deletable=True, filter_regex=None))
    assert _per_speaker([(s, c) for s, _u, c in theirs]) == _per_speaker(with_glm)
    assert _per_speaker([(s, c) for s, _u, c in plain]) == _per_speaker(without)
    assert _per_speaker(with_glm) != _per_speaker(without)     # the GLM mattered


def test_glm_rules_rewrite_like_rfilter1(tmp_path: Path) -> None:
    glm = tmp_path / "g.glm"
    glm.write_text(GLM.replace(";; INPUT_DEP", "ANYMORE => ANY MORE\n"
                               "[GONNA] => [GOING TO] / [ ] __ [ ]\n;; INPUT_DEP"))
    g = load_glm(glm)
    assert g.apply("uh i said um okay", ("trn", "ref")) == "%HESITATION I SAID %HESITATION OK"
    # context: 'UH' inside a word is not a hesitation
    assert g.apply("uhm huh", ("trn", "ref")) == "UHM HUH"
    # the contraction rule set is for hypotheses (ctm) only
    assert g.apply("i'm here", ("stm", "ref")) == "I'M HERE"
    assert g.apply("i'm here", ("ctm", "hyp")) == "{I'M / I AM} HERE"
    # context-free rules rewrite inside words too, as rfilter1 does
    assert g.apply("anymore", ("trn", "ref")) == "ANY MORE"
    assert g.apply("gonna go", ("trn", "ref")) == "GOING TO GO"


def test_malformed_glm_rule_names_line(tmp_path: Path) -> None:
    from asrtrain.core.errors import InputError

    glm = tmp_path / "bad.glm"
    glm.write_text(";; x\nUH => %HESITATION\nNOT A RULE\n")
    with pytest.raises(InputError, match=r"bad.glm: line 3: malformed GLM rule"):
        load_glm(glm)


TRICKY = ["uh", "um", "huh-uh", "mr.", "smith", "ain't", "'cause", "adviser", "binyamin",
          "netanyahu", "william", "falkner", "ok", "okay", "t.", "shirt", "fundraiser",
          "he's", "(uh)", "(the", "end)", "(ok)", "a", "well-known", "th-", "-ing"]


@pytest.mark.sclite
@pytest.mark.parametrize("split_hyphens", [False, True])
def test_rewrite_equals_csrfilt(tmp_path: Path, sclite: str, split_hyphens: bool) -> None:
    """Our GLM pipeline (case, parentheses, rules, -dh, spreading '(A B)') gives the very
    text csrfilt.sh gives, line by line, on a real Hub5 GLM excerpt."""
    rng = random.Random(5)
    lines = []
    for i in range(200):
        words = [rng.choice(TRICKY) for _ in range(rng.randint(0, 8))]
        text = " ".join(words)
        if text.count("(") != text.count(")") or ")(" in text.replace(" ", ""):
            text = text.replace("(", "").replace(")", "")
        lines.append((f"s_{i}", text))
    src = tmp_path / "in.trn"
    src.write_text("".join(f"{t} (s_{i})\n" for i, (_u, t) in enumerate(lines)))
    glm = Path(__file__).with_name("hub5_excerpt.glm")
    csrfilt = Path(sclite).parent / "csrfilt.sh"
    if not csrfilt.is_file():
        missing("csrfilt.sh not found beside sclite (Debian sctk; make install installs it)")
    args = ["sh", str(csrfilt), *(["-dh"] if split_hyphens else []), "-i", "trn", "-t", "ref",
            str(glm)]
    with open(src) as fin:
        out = subprocess.run(args, stdin=fin, capture_output=True, text=True, check=True,
                             env=sctk_env(sclite), timeout=60).stdout.splitlines()
    norm = Normalizer(load_glm(glm), split_hyphens=split_hyphens)
    theirs = [" ".join(line[:line.rindex("(")].split()) for line in out]
    ours = [norm.rewrite(t, ("trn", "ref")) for _u, t in lines]
    assert ours == theirs
    assert sum("%HESITATION" in t for t in theirs) > 20 and any("(" in t for t in theirs)
