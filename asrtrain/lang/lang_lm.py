"""The lang dir's language models: the full LM kept for rescoring, a pruned one for HCLG.

Kaldi's recipes decode with a pruned LM in HCLG and rescore the lattices with the full
one; a 36M-n-gram 4-gram would not fit in HCLG. ``prepare lang`` therefore reads the
full model (the user's ARPA, or the one it estimates from text) once into a trie, and
writes

* ``lm_full/``: the full LM as an :class:`LmStore` (memory-mapped arrays for rescoring);
* ``lm.arpa``: the first-pass LM, which G.fst is built from: the full model, or with
  ``--prune-threshold`` / ``--prune-ngrams`` its entropy-pruned copy;
* ``lm_first/``: when pruned, the first-pass LM as a store too (what the rescorer takes
  out of the lattice's costs);
* ``lm_report.json``: counts, vocabulary coverage, pruning, sizes, dev perplexities;
* ``lm_words.txt`` (an LM estimated from text): the words that text gave it, after
  ``--exclude-text``, for ``score --lm-text LANG`` (which reference words the LM never read).

The vocabulary is the lexicon's (``words.txt``): as ``arpa2fst --read-symbol-table``,
n-grams of ARPA words without a pronunciation are skipped, and lexicon words the ARPA
lacks can never be recognized; both are counted, logged and reported.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import ConfigError, InputError
from asrtrain.lang.lexicon import BOS, EOS, EPS, UNK
from asrtrain.lang.lmstore import LmStore
from asrtrain.lang.prune import prune
from asrtrain.lang.trie import NgramTrie, read_trie, write_arpa

log = logging.getLogger("asrtrain.lang.lm")

FULL_DIR, FIRST_DIR, REPORT, LM_WORDS = "lm_full", "lm_first", "lm_report.json", "lm_words.txt"
NOT_WORDS = (EPS, "#0")


@dataclass
class Pruning:
    """How to cut the first-pass LM: a threshold or a target number of n-grams (or neither)."""

    threshold: float | None = None
    ngrams: int | None = None

    def __post_init__(self) -> None:
        if self.threshold is not None and self.ngrams is not None:
            raise ConfigError("--prune-threshold and --prune-ngrams are alternatives: give one")
        if self.threshold is not None and not (self.threshold >= 0 and math.isfinite(self.threshold)):
            raise ConfigError(f"--prune-threshold {self.threshold}: must be a number >= 0")
        if self.ngrams is not None and self.ngrams < 1:
            raise ConfigError(f"--prune-ngrams {self.ngrams}: must be >= 1")

    @property
    def wanted(self) -> bool:
        return self.threshold is not None or self.ngrams is not None


def lm_vocab(words: dict[str, int]) -> dict[str, int]:
    """The words an LM may use: words.txt without ``<eps>`` and ``#0``."""
    return {w: i for w, i in words.items() if w not in NOT_WORDS}


def build_lms(arpa: Path, out: Path, words: dict[str, int], lexicon_words: list[str],
              pruning: Pruning, dev: list[list[str]] | None = None,
              first_arpa_written: bool = False, text_figures: dict | None = None) -> dict:
    """Read ``arpa`` and write the lang dir's LMs (see the module doc); returns figures.

    ``first_arpa_written``: ``out/lm.arpa`` already holds the full model (estimated from
    text) and no pruning is asked, so it is not written again. ``text_figures``: what the
    LM text's reading counted (lines left out), kept in the report.
    """
    t0 = time.time()
    trie, stats = read_trie(arpa, lm_vocab(words))
    names = {i: w for w, i in words.items()}
    figures: dict = {**(text_figures or {}), "lm_order": trie.order, "ngrams_full": trie.counts(),
                     "arpa": stats.summary(), "read_s": round(time.time() - t0, 2)}
    _report_vocabulary(arpa, trie, stats, words, lexicon_words, figures)
    bos, eos = words[BOS], words[EOS]
    unk = words.get(UNK)
    t = time.time()
    LmStore.from_trie(trie, bos, eos, unk).save(out / FULL_DIR)
    full = LmStore.load(out / FULL_DIR)  # mapped: its pages, not a copy, while pruning
    figures.update(store_bytes=full.nbytes(), store_s=round(time.time() - t, 2),
                   store_bytes_per_ngram=round(full.nbytes() / max(1, sum(trie.counts())), 2))
    log.info("LM: full model %s n-grams (order %d), store %s: %.1f MB, %.1f bytes per n-gram",
             trie.counts(), trie.order, out / FULL_DIR, full.nbytes() / 1e6,
             figures["store_bytes_per_ngram"])
    first_trie, first = trie, full
    if pruning.wanted:
        t = time.time()
        done = prune(trie, bos, eos, threshold=pruning.threshold, target=pruning.ngrams)
        first_trie = done.trie
        LmStore.from_trie(first_trie, bos, eos, unk).save(out / FIRST_DIR)
        first = LmStore.load(out / FIRST_DIR)
        figures.update(prune_threshold=done.threshold, prune_s=round(time.time() - t, 2),
                       unprunable_ngrams=done.unprunable)
        log.info("LM: first pass pruned at threshold %.3g to %s n-grams (%.1f%% of the full "
                 "model) in %.1fs", done.threshold, done.after,
                 100.0 * sum(done.after) / max(1, sum(done.before)), figures["prune_s"])
    figures["ngrams_first"] = first_trie.counts()
    if pruning.wanted or not first_arpa_written:
        t = time.time()
        write_arpa(first_trie, out / "lm.arpa", names)
        figures["write_arpa_s"] = round(time.time() - t, 2)
    if dev:
        for name, store in (("full", full), ("first-pass", first)):
            ppl, scored, oov = perplexity(store, dev, words)
            figures[f"dev_perplexity_{name.split('-')[0]}"] = ppl
            log.info("LM: dev perplexity of the %s model %.1f over %d tokens (%d OOV not scored)",
                     name, ppl, scored, oov)
    figures["lm_s"] = round(time.time() - t0, 2)
    write_text(out / REPORT, json.dumps(figures, indent=2) + "\n")
    return figures


def _report_vocabulary(arpa: Path, trie: NgramTrie, stats, words: dict[str, int],
                       lexicon_words: list[str], figures: dict) -> None:
    """Count (and log) the ARPA's words without pronunciations and the lexicon's without
    probabilities; an ARPA that shares no word with the lexicon is an error."""
    missing = [w for w in lexicon_words if w != UNK and not trie.present[words[w]]]
    figures["arpa_words_not_in_lexicon"] = len(stats.oov_words)
    figures["lexicon_words_not_in_lm"] = len(missing)
    figures["lexicon_words_not_in_lm_examples"] = missing[:10]
    if stats.oov_words:
        log.warning("%s: %d words are not in the lexicon; their %s n-grams (by order) were "
                    "skipped, as arpa2fst does, e.g. %s", arpa, len(stats.oov_words),
                    stats.skipped, ", ".join(w for w, _ in stats.oov_words.most_common(5)))
    if missing:
        log.warning("%s: %d lexicon words have no unigram in the LM and cannot be recognized,"
                    " e.g. %s", arpa, len(missing), ", ".join(missing[:5]))
    if not (trie.present[words[BOS]] and trie.present[words[EOS]]):
        raise InputError("the ARPA has no <s> or no </s> unigram", arpa)
    if int(trie.present.sum()) <= 2:
        raise InputError("no word of the ARPA is in the lexicon", arpa)
    if UNK in words and trie.present[words[UNK]]:
        log.info("LM: %s has probabilities (an ARPA's <unk> is read as it)", UNK)


def perplexity(store: LmStore, sentences: list[list[str]], words: dict[str, int]) -> tuple[float, int, int]:
    """(perplexity, scored tokens incl. ``</s>``, OOV tokens), as ``lm.perplexity``: a word
    the LM lacks is not scored and the history starts again after it; ``<UNK>`` is not
    scored but stays in the history."""
    total, scored, oov = 0.0, 0, 0
    unk = words.get(UNK)
    for sent in sentences:
        state = store.start_state()
        for w in [*sent, EOS]:
            i = words.get(w, -1)
            if not store.has_word(i):
                oov += 1
                state = 0
                continue
            cost, state = store.score(state, i)
            if i == unk:
                oov += 1
            else:
                total += cost
                scored += 1
    return (math.exp(total / scored) if scored else float("inf")), scored, oov


def load_lms(lang: Path) -> tuple[LmStore, LmStore]:
    """(first-pass LM, full LM) of a lang dir: what rescoring swaps out and in."""
    full = LmStore.load(Path(lang) / FULL_DIR)
    first_dir = Path(lang) / FIRST_DIR
    return (LmStore.load(first_dir) if first_dir.exists() else full), full
