"""``prepare lang``: from a dict dir, LM text and phone alignments to a lang dir and HCLG.

Writes (contract 6): phones.txt, words.txt, L.fst, L_disambig.fst, lm.arpa, G.fst, tree
(+ tree.pdfs.txt, tree_id), num_pdfs, pdf_ali/{split}.{ark,scp}, graph/ (HCLG.fst with
input labels pdf+1, words.txt, phones.txt, tree, align_lexicon.txt, info.json); and the
LMs of ``lang_lm``: lm_full/ (the full LM for rescoring), lm_first/ and lm_full.arpa when
the first pass is pruned, lm_report.json.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path

from asrtrain.core.atomic import atomic_path, write_text
from asrtrain.core.errors import ConfigError, InputError
from asrtrain.core.textio import read_lines
from asrtrain.lang import graph as graphs
from asrtrain.lang.hmm import Topology, estimate_topology
from asrtrain.lang.lang_lm import LM_WORDS, Pruning, build_lms
from asrtrain.lang.lexicon import (
    UNK,
    align_lexicon_text,
    lexicon_fst,
    phone_table,
    read_dict_dir,
    read_symbols,
    word_table,
    write_symbols,
)
from asrtrain.lang.lm import estimate, parse_min_count, write_arpa
from asrtrain.lang.pdf_ali import read_split, write_pdf_alignments
from asrtrain.lang.targets import uses_states
from asrtrain.lang.tree import ContextTree, build_tree, pdf_table_text

log = logging.getLogger("asrtrain.lang")


def read_sentences(path: Path, has_ids: bool, upper: bool = True) -> list[list[str]]:
    """Word lists of an LM text (one sentence per line) or a Kaldi ``text``; upper-cased
    (the synthesizer's words) unless the words must match an ARPA file as spelled."""
    out = []
    for line in read_lines(path):  # a missing or undecodable file is an InputError naming it
        words = (line.upper() if upper else line).split()
        if has_ids:
            words = words[1:]
        if words:
            out.append(words)
    return out


def map_oov(sentences: list[list[str]], vocab: set[str], what: Path) -> tuple[list[list[str]], int]:
    """Replace words missing from the lexicon by ``<UNK>``; count and log them."""
    oov: Counter[str] = Counter()
    mapped = []
    for words in sentences:
        row = []
        for w in words:
            if w in vocab:
                row.append(w)
            else:
                oov[w] += 1
                row.append(UNK)
        mapped.append(row)
    n = sum(oov.values())
    if n:
        log.warning("%s: %d tokens (%d distinct words) are not in the lexicon and were mapped to %s,"
                    " e.g. %s", what, n, len(oov), UNK, ", ".join(w for w, _ in oov.most_common(5)))
    return mapped, n


def _key(words: list[str]) -> tuple[str, ...]:
    """A sentence as the LM text and a Kaldi text are compared: its words, upper-cased."""
    return tuple(w.upper() for w in words)


def leave_out(sentences: list[list[str]], lm_text: Path, exclude_text: Path) -> tuple[list[list[str]], dict]:
    """``sentences`` less one copy of each transcript in ``exclude_text`` (a Kaldi text).

    Why: a dev set held out of train by speakers keeps its transcripts in an LM text made
    of the training transcripts, and an LM that has read dev's sentences makes dev's WER
    flatter the LM weight it picks (speechocean762: all 160 dev sentences in the LM text,
    4 of 500 test ones). One copy per utterance, so a sentence other speakers also read
    stays as often as they read it. Words compare upper-cased.
    """
    wanted = Counter(_key(words) for words in read_sentences(exclude_text, True))
    if not wanted:
        raise InputError("no transcripts to leave out of the LM text", exclude_text)
    kept, found = [], 0
    for words in sentences:
        key = _key(words)
        if wanted[key] > 0:
            wanted[key] -= 1
            found += 1
        else:
            kept.append(words)
    total = found + sum(wanted.values())
    log.info("LM text %s: %d lines left out, the transcripts of %d of the %d utterances in %s "
             "(%d not in the LM text)", lm_text, found, found, total, exclude_text, total - found)
    return kept, {"lm_text_lines": len(sentences), "lm_lines_left_out": found, "exclude_text": str(exclude_text),
                  "exclude_utterances": total}


def rung_tree_for(path: Path, topo: Topology, phones: dict[str, int]) -> ContextTree:
    """The tree of an aligner rung (``prepare align``'s models/NAME.pt) with this lang's
    topology: the same phones, numbered alike, and the same states a phone."""
    from dataclasses import replace

    from asrtrain.align.saved import load_rung

    rung = load_rung(path)
    mismatch = sorted(p for i, p in rung.phones.items() if phones.get(p) != i)
    if mismatch:
        raise InputError(f"--tree: its phones are numbered otherwise than this lang's "
                         f"({', '.join(mismatch[:5])}): a rung of another alignment dir?", path)
    theirs = rung.tree.topo.num_states
    names = {i: p for p, i in phones.items()}
    missing = sorted(names.get(p, str(p)) for p in topo.num_states if p not in theirs)
    if missing:
        raise InputError(f"--tree: no pdfs for the phones {', '.join(missing[:5])}", path)
    if any(theirs[p] != n for p, n in topo.num_states.items()):
        raise InputError("--tree: its phones' HMM states differ from this lang's (--states)", path)
    log.info("tree: the %d pdfs of %s (rung %s)", rung.tree.num_pdfs, path, rung.name)
    return replace(rung.tree, topo=topo)


def prepare_lang(dict_dir: Path, lm_text: Path | None, ali_dir: Path, out: Path, order: int = 4,
                 num_pdfs: int = 2000, min_count: str | None = None, states: int = 3,
                 pron_min_count: int = 1, targets: str = "auto", arpa: Path | None = None,
                 pruning: Pruning | None = None, exclude_text: Path | None = None,
                 tree_from: Path | None = None) -> dict:
    """Build the whole lang directory and the graph; returns the figures it logged.

    The LM is estimated from ``lm_text``, or read from ``arpa`` (one of the two);
    ``pruning`` cuts the first-pass LM that G and HCLG are built from;
    ``exclude_text`` (a Kaldi text) names transcripts the LM must not learn
    (:func:`leave_out`); ``tree_from`` (an aligner rung file) gives the tree instead of
    one grown here with ``num_pdfs`` (Kaldi's nnet recipes train on the GMM's tree).
    """
    t0 = time.time()
    pruning = pruning or Pruning()
    if (lm_text is None) == (arpa is None):
        raise ConfigError("give the LM as text (LM_TEXT) or as an ARPA file (--arpa), one of them")
    if exclude_text is not None and lm_text is None:
        raise ConfigError("--exclude-text leaves lines out of LM_TEXT: it cannot apply to an --arpa LM")
    parse_min_count(min_count, order)  # option errors before any work
    out.mkdir(parents=True, exist_ok=True)
    phones_txt = ali_dir / "phones.txt"
    lex = read_dict_dir(dict_dir, phones_txt if phones_txt.exists() else None)
    train_scp = ali_dir / "train" / "ali.scp"
    if not train_scp.exists():
        raise InputError("training alignments not found", train_scp)
    train = list(read_split(ali_dir, "train", targets))
    if not train:
        raise InputError("no training alignments", train_scp)
    figures: dict = {}
    if pron_min_count > 0:
        figures["pron_variants"] = add_learned_variants(lex, ali_dir, train, pron_min_count)
    ptab, wtab = phone_table(lex), word_table(lex)
    write_symbols(out / "phones.txt", ptab)
    write_symbols(out / "words.txt", wtab)
    write_text(out / "align_lexicon.txt", align_lexicon_text(lex))
    disambig_ids = [i for p, i in ptab.items() if p.startswith("#")]
    write_text(out / "disambig_phones.int", "".join(f"{i}\n" for i in disambig_ids))
    L, L_disambig = lexicon_fst(lex, False), lexicon_fst(lex, True)
    graphs.write_fst(L, out / "L.fst")
    graphs.write_fst(L_disambig, out / "L_disambig.fst")
    figures.update(words=len(lex.words), prons=len(lex.prons), disambig=lex.num_disambig)

    figures.update(_language_models(lex.words, wtab, lm_text, arpa, ali_dir, out, order,
                                    min_count, pruning, exclude_text))
    g_path = out / "G.fst"
    _arpa_to_g(out / "lm.arpa", out / "words.txt", g_path)

    figures["targets"] = "states" if uses_states(ali_dir, "train", targets) else "even"
    log.info("targets: %s", "the aligner's HMM states" if figures["targets"] == "states"
             else "each phone split evenly into its states")
    sil_ids = [lex.phones[lex.silence]]
    topo = estimate_topology(train, lex.phones.values(), states=states, sil_phones=sil_ids)
    if tree_from is None:
        tree, _ = build_tree(train, topo, ci_phones=sil_ids, num_pdfs=num_pdfs)
    else:
        tree = rung_tree_for(tree_from, topo, lex.phones)
    del train
    tree_id = tree.identity()
    write_text(out / "tree", json.dumps(tree.to_json()) + "\n")
    write_text(out / "tree.pdfs.txt", pdf_table_text(tree, {i: p for p, i in lex.phones.items()}))
    write_text(out / "tree_id", tree_id + "\n")
    write_text(out / "num_pdfs", f"{tree.num_pdfs}\n")
    figures.update(num_pdfs=tree.num_pdfs, tree_id=tree_id)

    (out / "pdf_ali").mkdir(exist_ok=True)
    for split in aligned_splits(ali_dir):
        write_pdf_alignments(ali_dir, split, tree, out / "pdf_ali" / split, targets)
    write_text(out / "pdf_ali" / "tree_id", tree_id + "\n")

    import kaldifst

    sizes: dict[str, tuple[int, int]] = {}
    G = kaldifst.StdVectorFst.read(str(g_path))
    sizes["G"] = graphs.size(G)
    lg = graphs.build_lg(L_disambig, G)
    del L, L_disambig, G        # not held through HCLG's steps
    sizes["LG"] = graphs.size(lg)
    log.info("graph: LG done at %.1fs (%d states, %d arcs)", time.time() - t0, *sizes["LG"])
    hclg = graphs.build_hclg(lg, tree, disambig_ids, sizes)
    del lg
    graphs.write_graph_dir(out / "graph", hclg, out, tree, lex.silence, sizes)
    figures["sizes"] = sizes
    for k, (s, a) in sizes.items():
        log.info("graph size %-6s %9d states %10d arcs", k, s, a)
    log.info("prepare lang done in %.1fs", time.time() - t0)
    return figures


def _language_models(lex_words: list[str], wtab: dict[str, int], lm_text: Path | None,
                     arpa: Path | None, ali_dir: Path, out: Path, order: int,
                     min_count: str | None, pruning: Pruning, exclude_text: Path | None = None) -> dict:
    """The full LM (estimated from text, or the user's ARPA) and the first pass: lm.arpa."""
    figures: dict = {}
    text_figures: dict = {}  # kept in lm_report.json
    dev_text = ali_dir / "dev" / "text"
    dev = read_sentences(dev_text, True, upper=lm_text is not None) if dev_text.exists() else None
    full_arpa = arpa
    if lm_text is not None:
        sentences = read_sentences(lm_text, False)
        if exclude_text is not None:
            sentences, text_figures = leave_out(sentences, lm_text, exclude_text)
        if dev:
            text_figures["dev_sentences_in_lm_text"] = dev_in_text(dev, sentences, dev_text)
        sentences, text_figures["lm_oov_tokens"] = map_oov(sentences, set(lex_words), lm_text)
        write_lm_words(sentences, out / LM_WORDS)
        lm = estimate(sentences, order=order, vocab=lex_words, min_count=min_count)
        del sentences
        full_arpa = out / ("lm_full.arpa" if pruning.wanted else "lm.arpa")
        write_arpa(full_arpa, lm)
        figures["discounts"] = [list(map(float, d)) for d in lm.discounts]
        log.info("LM: order %d, n-grams %s, discounts %s", order, [len(p) for p in lm.prob],
                 [tuple(round(x, 3) for x in d) for d in lm.discounts])
        del lm
    else:
        log.info("LM: %s (--order and --min-count apply to LM text only)", arpa)
        (out / LM_WORDS).unlink(missing_ok=True)  # no text: a former run's list would mislead
    assert full_arpa is not None
    got = build_lms(full_arpa, out, wtab, lex_words, pruning, dev,
                    first_arpa_written=lm_text is not None and not pruning.wanted, text_figures=text_figures)
    figures.update(got, ngrams=got["ngrams_full"])
    if "dev_perplexity_full" in got:
        figures["dev_perplexity"] = got["dev_perplexity_full"]
    return figures


def write_lm_words(sentences: list[list[str]], path: Path) -> None:
    """The words the LM is estimated from, one a line: what ``score --lm-text LANG`` splits the
    reference by, after ``--exclude-text`` (the raw text would count dev's words as read)."""
    words = sorted({w for s in sentences for w in s} - {UNK})
    write_text(path, "".join(f"{w}\n" for w in words))


def dev_in_text(dev: list[list[str]], sentences: list[list[str]], dev_text: Path) -> float:
    """The share of dev's transcripts that the LM text holds word for word, logged: near 1 where
    the corpus' sentences repeat across speakers, or where the LM text holds dev's own lines."""
    have = {_key(words) for words in sentences}
    share = sum(_key(words) in have for words in dev) / len(dev)
    log.info("LM text holds %.0f%% of the dev transcripts (%s) word for word", 100 * share, dev_text)
    return round(share, 4)


def add_learned_variants(lex, ali_dir: Path, train: list, min_count: int) -> int:
    """Add the in-context pronunciations of the training utterances to ``lex``."""
    from asrtrain.lang.lexicon import add_disambig
    from asrtrain.lang.prons import learn_variants

    text_path = ali_dir / "train" / "text"
    if not text_path.exists():
        log.warning("%s is missing: no pronunciation variants learned", text_path)
        return 0
    text = {p[0]: [w.upper() for w in p[1:]] for p in
            (ln.split() for ln in read_lines(text_path)) if p}
    names = {i: p for p, i in lex.phones.items()}
    sil = lex.phones[lex.silence]
    prons: dict[str, list[tuple[str, ...]]] = {}
    for w, p in lex.prons:
        prons.setdefault(w, []).append(p)

    def utterances():
        for ali in train:
            if ali.utt in text:
                yield text[ali.utt], [names[p] for p, _, _ in ali.segments() if p != sil]

    new, _ = learn_variants(utterances(), prons, min_count)
    lex.prons.extend(new)
    add_disambig(lex)
    return len(new)


def _arpa_to_g(arpa: Path, words_txt: Path, g_path: Path) -> None:
    """G.fst through kaldilm, ``#0`` on the back-off arcs, ``<s>``/``</s>`` as epsilons."""
    import kaldilm

    with atomic_path(g_path) as tmp:
        kaldilm.arpa2fst(str(arpa), str(tmp), disambig_symbol="#0",
                         read_symbol_table=str(words_txt))
        if not Path(tmp).exists():
            raise InputError("kaldilm could not convert the ARPA file", arpa)


def load_words(path: Path) -> dict[int, str]:
    """id → word of a words.txt."""
    return {i: w for w, i in read_symbols(path).items()}


def aligned_splits(ali_dir: Path) -> list[str]:
    """Every split the alignment dir holds (train, dev, test, training copies such as
    ``prepare align --extra sp=``): the dirs with an ``ali.scp``."""
    return sorted(p.parent.name for p in Path(ali_dir).glob("*/ali.scp"))
