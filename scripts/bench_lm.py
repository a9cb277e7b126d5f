#!/usr/bin/env python
"""What does the LM side of ``prepare lang`` cost as the LM grows, and how does ours
compare with kaldingram? Everything measured here is what ``prepare lang`` runs.

1. **Estimation** on the embedded corpus' largest text (the synthesizer's pool minus dev
   and test: ``recipes/synth/data/corpus/lm_text``, 67k sentences): asrtrain's modified
   Kneser-Ney (``lang/lm.py``, no cut-offs) against ``kaldingram train`` (SRILM's
   unmodified back-off KN) on the same text: n-grams, time, peak memory, perplexity on
   the corpus' dev+test transcripts (tokens both models know).
2. **The LM stage of prepare lang** (``lang/lang_lm.py``) on ARPAs of growing size (ours
   on ¼, ½ and all of the text, and a synthetic 4-gram of a few million n-grams over an
   85k vocabulary made here): ARPA read, store build, entropy pruning to a tenth (of the
   n-grams above the unigrams, which pruning keeps), the
   first-pass ARPA, G.fst (kaldilm); CPU and wall seconds and peak RSS of each phase (the
   peak is reset between phases through /proc/self/clear_refs), store bytes per n-gram,
   and LmStore scoring (one call at a time, and batched).
3. **Pruning, ours against kaldingram's** on the full-text ARPA at the same threshold.
4. **On paper**: the fitted per-n-gram costs applied to the papers' 36M-n-gram 4-gram.

Each measurement runs in a child process of its own, so peaks do not mix. The machine's
cores may be shared: CPU seconds are the steadier figure.

Usage::

    .venv/bin/python scripts/bench_lm.py                 # about 5 minutes on 2 cores
    .venv/bin/python scripts/bench_lm.py --synthetic 500000 --no-kaldingram   # quick
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO / "recipes" / "synth" / "data" / "corpus"
SPECIAL = ["<UNK>", "#0", "<s>", "</s>"]


# -- measuring ---------------------------------------------------------------------------
def _peak_kb() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _reset_peak() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


class Phases:
    """CPU s, wall s and peak RSS (MB) of each phase of a child process."""

    def __init__(self) -> None:
        self.out: dict[str, dict] = {}

    def __call__(self, name: str, fn, *args, **kwargs):
        _reset_peak()
        c0, w0 = time.process_time(), time.perf_counter()
        got = fn(*args, **kwargs)
        self.out[name] = {"cpu": round(time.process_time() - c0, 2),
                          "wall": round(time.perf_counter() - w0, 2), "peak_mb": _peak_kb() // 1024}
        return got


def child(*args: str) -> dict:
    """Run this script's ``--child`` mode in a fresh process; its JSON result."""
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                          text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    if proc.returncode:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- the vocabulary ----------------------------------------------------------------------
def text_vocab(text: Path) -> dict[str, int]:
    words = sorted({w for line in text.read_text().splitlines() for w in line.split()})
    return {w: i for i, w in enumerate(["<eps>", *words, *SPECIAL])}


def held_out() -> list[list[str]]:
    return [ln.split()[1:] for split in ("dev", "test") if (CORPUS / split / "text").exists()
            for ln in (CORPUS / split / "text").read_text().splitlines() if ln.split()[1:]]


# -- children ----------------------------------------------------------------------------
def do_estimate(text: Path, fraction: float, arpa: Path) -> dict:
    from asrtrain.lang.lm import estimate, write_arpa

    ph = Phases()
    lines = text.read_text().splitlines()
    sents = [ln.split() for ln in lines[: int(len(lines) * fraction)] if ln.strip()]
    lm = ph("estimate", estimate, sents, order=4, min_count="1")
    ph("write ARPA", write_arpa, arpa, lm)
    return {"phases": ph.out, "ngrams": [len(p) for p in lm.prob]}


def do_measure(cmd: list[str]) -> dict:
    """A command's wall time and peak RSS (its own process)."""
    t = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"phases": {"run": {"cpu": round(use.ru_utime + use.ru_stime, 2),
                               "wall": round(time.perf_counter() - t, 2),
                               "peak_mb": use.ru_maxrss // 1024}}}


def do_lm_stage(arpa: Path, words_txt: Path, work: Path, tenth: bool) -> dict:
    """The phases of lang_lm.build_lms, timed one by one, then G and scoring."""
    import kaldilm

    from asrtrain.lang.lexicon import read_symbols
    from asrtrain.lang.lmstore import LmStore
    from asrtrain.lang.prune import prune
    from asrtrain.lang.trie import read_trie, write_arpa

    ph = Phases()
    words = read_symbols(words_txt)
    lm_words = {w: i for w, i in words.items() if w not in ("<eps>", "#0")}
    base_mb = _peak_kb() // 1024
    trie, _ = ph("read ARPA", read_trie, arpa, lm_words)
    bos, eos, unk = words["<s>"], words["</s>"], words["<UNK>"]

    def store_build(t):
        LmStore.from_trie(t, bos, eos, unk).save(work / "lm_full")
        return LmStore.load(work / "lm_full")   # mapped, as prepare lang keeps it

    store = ph("store build+save", store_build, trie)
    counts = trie.counts()   # a tenth of the n-grams above the unigrams (which stay)
    target = counts[0] + sum(counts[1:]) // 10
    pruned = ph("prune to 1/10", prune, trie, bos, eos, target=target) if tenth else None
    first = pruned.trie if pruned else trie
    ph("write first-pass ARPA", write_arpa, first, work / "lm.arpa", {i: w for w, i in words.items()})
    ph("G (kaldilm, first pass)", kaldilm.arpa2fst, str(work / "lm.arpa"), str(work / "G.fst"),
       disambig_symbol="#0", read_symbol_table=str(words_txt))
    del trie, first, pruned, store
    loaded = LmStore.load(work / "lm_full")
    rng = np.random.default_rng(0)
    vocab = np.array([i for i in lm_words.values() if loaded.has_word(i) and i != bos])
    sents = rng.choice(vocab, size=(2000, 10))

    def scalar():
        for s in sents.tolist():
            loaded.sentence_cost(s)

    ph("score 22k words, one call each", scalar)
    states = np.full(200_000, loaded.start_state())
    batch_words = rng.choice(vocab, size=(5, 200_000))

    def batched():
        st = states
        for w in batch_words:
            _, st = loaded.score_batch(st, w)

    ph("score 1M words, batches of 200k", batched)
    return {"phases": ph.out, "ngrams": loaded.counts(), "store_bytes": loaded.nbytes(),
            "base_mb": base_mb, "first": pruned_counts(work / "lm.arpa")}


def pruned_counts(arpa: Path) -> list[int]:
    out = []
    with open(arpa) as fh:
        for line in fh:
            if line.startswith("ngram "):
                out.append(int(line.split("=")[1]))
            elif line.startswith("\\1-grams"):
                break
    return out


def do_kaldingram_prune(arpa: Path, threshold: float, out: Path) -> dict:
    import logging

    from kaldingram.prune import ArpaParser, prune

    logging.disable(logging.WARNING)
    os.environ["TQDM_DISABLE"] = "1"
    ph = Phases()
    lm = ph("read ARPA", lambda: ArpaParser().loadf(str(arpa))[0])
    ph("prune", prune, lm, threshold, 1)
    ph("write ARPA", ArpaParser().dumpf, lm, str(out))
    return {"phases": ph.out, "ngrams": [c for _, c in lm.counts()]}


def do_ours_prune(arpa: Path, words_txt: Path, threshold: float) -> dict:
    from asrtrain.lang.lexicon import read_symbols
    from asrtrain.lang.prune import prune
    from asrtrain.lang.trie import read_trie

    ph = Phases()
    words = read_symbols(words_txt)
    trie, _ = ph("read ARPA", read_trie, arpa, {w: i for w, i in words.items() if w != "<eps>"})
    got = ph("prune", prune, trie, words["<s>"], words["</s>"], threshold=threshold)
    return {"phases": ph.out, "ngrams": got.after}


def append_order(trie, grams: np.ndarray, rng: np.random.Generator) -> None:
    """Append order ``grams.shape[1]`` (sorted, unique n-grams) to ``trie``: each n-gram's
    probability its lower order's times a log-normal factor, 0.6 of each context's mass kept
    for the explicit n-grams, back-off weights made consistent (``recompute_order_bows``)."""
    from asrtrain.lang.prune import recompute_order_bows

    n = grams.shape[1]
    ctx = trie.find(grams[:, :-1]) if n > 2 else grams[:, 0].astype(np.int64)
    first = np.zeros(trie.rows(n - 1) + 1, np.int64)
    np.cumsum(np.bincount(ctx, minlength=trie.rows(n - 1)), out=first[1:])
    trie.first.append(first.astype(np.int32))
    trie.word.append(grams[:, -1].copy())
    lower = trie.cond_logprob(grams[:, 1:-1], grams[:, -1])
    x = 10.0 ** lower * rng.lognormal(0.0, 1.0, size=lower.shape[0])
    total = np.bincount(ctx, x, minlength=trie.rows(n - 1))[ctx]
    trie.logp.append(np.log10(0.6 * x / total).astype(np.float32))
    if n < trie.order:
        trie.bow.append(np.zeros(grams.shape[0], np.float32))
    recompute_order_bows(trie, n)


def do_synthetic(arpa: Path, words_txt: Path, tokens: int, vocab_size: int) -> dict:
    """A normalized back-off 4-gram over ``vocab_size`` words: the distinct n-grams of a
    Zipf-distributed random text, each listed word's probability its lower-order one times
    a log-normal factor, 40% of each context's mass left to the back-off."""
    from asrtrain.lang.trie import NgramTrie, write_arpa

    ph = Phases()
    rng = np.random.default_rng(1)
    names = ["<eps>", *(f"w{k}" for k in range(vocab_size)), *SPECIAL]
    ids = {w: i for i, w in enumerate(names)}
    words_txt.write_text("".join(f"{w} {i}\n" for w, i in ids.items()))
    bos, eos, unk = ids["<s>"], ids["</s>"], ids["<UNK>"]
    zipf = 1.0 / (np.arange(vocab_size) + 10.0)
    lengths = rng.integers(5, 25, size=tokens // 15)
    text = rng.choice(np.arange(1, vocab_size + 1), size=int(lengths.sum()), p=zipf / zipf.sum())
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    sid = np.repeat(np.arange(lengths.size), lengths)
    sent = np.empty(text.size + 2 * lengths.size, dtype=np.int32)   # <s> words </s> ...
    sent[np.arange(text.size) + 2 * sid + 1] = text
    heads = starts + 2 * np.arange(lengths.size)
    sent[heads], sent[heads + lengths + 1] = bos, eos
    V = len(names)
    logp1 = np.full(V, np.nan, np.float32)
    uni = np.r_[zipf, zipf[0], zipf[-1]]                  # the words, </s>, <UNK>
    uni = np.log10(uni / uni.sum())
    logp1[1:vocab_size + 1], logp1[eos], logp1[unk], logp1[bos] = uni[:-2], uni[-2], uni[-1], -99
    trie = NgramTrie(order=4, vocab_size=V, logp=[logp1], bow=[np.zeros(V, np.float32)],
                     word=[np.zeros(0, np.int32)], first=[])

    def add_order(n: int) -> None:
        win = np.lib.stride_tricks.sliding_window_view(sent, n)
        ok = (win[:, 1:] != bos).all(axis=1) & (win[:, :-1] != eos).all(axis=1)
        append_order(trie, np.unique(win[ok], axis=0).astype(np.int32), rng)

    for n in (2, 3, 4):
        ph(f"{n}-grams", add_order, n)
    ph("write ARPA", write_arpa, trie, arpa, dict(enumerate(names)))
    return {"phases": ph.out, "ngrams": trie.counts()}


CHILDREN = {"estimate": lambda a: do_estimate(Path(a[0]), float(a[1]), Path(a[2])),
            "measure": lambda a: do_measure(a),
            "lm": lambda a: do_lm_stage(Path(a[0]), Path(a[1]), Path(a[2]), a[3] == "1"),
            "kng-prune": lambda a: do_kaldingram_prune(Path(a[0]), float(a[1]), Path(a[2])),
            "ours-prune": lambda a: do_ours_prune(Path(a[0]), Path(a[1]), float(a[2])),
            "synthetic": lambda a: do_synthetic(Path(a[0]), Path(a[1]), int(a[2]), int(a[3]))}


# -- the parent --------------------------------------------------------------------------
def show(title: str, res: dict) -> None:
    print(f"{title}: n-grams {res.get('ngrams')} ({sum(res.get('ngrams') or [0]):,})")
    for name, f in res["phases"].items():
        print(f"    {name:34} cpu {f['cpu']:8.2f} s  wall {f['wall']:8.2f} s  peak {f['peak_mb']:6d} MB")


def perplexities(arpas: dict[str, Path], words_txt: Path) -> None:
    from asrtrain.lang.lang_lm import perplexity
    from asrtrain.lang.lexicon import read_symbols
    from asrtrain.lang.lmstore import LmStore
    from asrtrain.lang.trie import read_trie

    words = read_symbols(words_txt)
    stores = {}
    for name, path in arpas.items():
        trie, _ = read_trie(path, {w: i for w, i in words.items() if w != "<eps>"})
        stores[name] = LmStore.from_trie(trie, words["<s>"], words["</s>"], words["<UNK>"])
    both = [[w for w in s if all(st.has_word(words.get(w, -1)) for st in stores.values())]
            for s in held_out()]
    for name, store in stores.items():
        ppl, scored, oov = perplexity(store, both, words)
        print(f"    held-out perplexity {name:28} {ppl:8.1f} over {scored} tokens")


def extrapolate(rows: list[tuple[int, dict]], target: int = 36_000_000) -> None:
    """Each phase's CPU seconds and peak RSS above the process' start, per n-gram, from
    each model; the largest one's rates applied to ``target`` n-grams."""
    print(f"\nPer million n-grams (CPU s / MB of peak RSS above the start), and on paper for "
          f"{target / 1e6:.0f}M n-grams at the largest model's rates:")
    phases = [k for k in rows[-1][1]["phases"] if not k.startswith("score")]
    for key in phases:
        rates = [(r["phases"][key]["cpu"] / n * 1e6, (r["phases"][key]["peak_mb"] - r["base_mb"]) / n * 1e6)
                 for n, r in rows]
        cpu, mb = rates[-1]
        print(f"    {key:26} " + "  ".join(f"{c:5.2f} s {m:4.0f} MB" for c, m in rates)
              + f"   -> {cpu * target / 1e6:6.0f} s {mb * target / 1e6:6.0f} MB")
    for key in [k for k in rows[-1][1]["phases"] if k.startswith("score")]:
        words = 22_000 if "22k" in key else 1_000_000
        print(f"    {key:34} " + "  ".join(f"{r['phases'][key]['cpu'] / words * 1e6:5.2f} us/word"
                                            for _, r in rows))
    bpn = rows[-1][1]["store_bytes"] / rows[-1][0]
    print(f"    store {bpn:.1f} bytes per n-gram -> {bpn * target / 1e6:.0f} MB mapped for rescoring")


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        print(json.dumps(CHILDREN[sys.argv[2]](sys.argv[3:])))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/bench_lm"))
    ap.add_argument("--text", type=Path, default=CORPUS / "lm_text")
    ap.add_argument("--synthetic", type=int, default=1_500_000,
                    help="tokens of the synthetic text (about 2 n-grams per token)")
    ap.add_argument("--vocab", type=int, default=85_000)
    ap.add_argument("--no-kaldingram", action="store_true")
    ap.add_argument("--reuse", action="store_true",
                    help="keep the ARPA files of an earlier run in --work (skip parts 1 and 3)")
    args = ap.parse_args()
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    words_txt = work / "text_words.txt"
    words_txt.write_text("".join(f"{w} {i}\n" for w, i in text_vocab(args.text).items()))

    print(f"== 1. estimation on {args.text} ==")
    for frac in (() if args.reuse else (0.25, 0.5, 1.0)):
        show(f"asrtrain MKN 4-gram on {frac:g} of the text",
             child("estimate", str(args.text), str(frac), str(work / f"ours_{frac:g}.arpa")))
    if not (args.no_kaldingram or args.reuse):
        kng = str(Path(sys.executable).parent / "kaldingram")
        show("kaldingram train (KN back-off) on all of it",
             child("measure", kng, "train", "--ngram-order", "4", "--text", str(args.text),
                   "--lm", str(work / "kaldingram.arpa")) | {"ngrams": pruned_counts(work / "kaldingram.arpa")})
        perplexities({"asrtrain MKN (no cut-offs)": work / "ours_1.arpa",
                      "kaldingram KN": work / "kaldingram.arpa"}, words_txt)

    print("\n== 2. the LM stage of prepare lang ==")
    rows = []
    for frac in (0.25, 0.5, 1.0):
        d = work / f"lang_{frac:g}"
        d.mkdir(exist_ok=True)
        res = child("lm", str(work / f"ours_{frac:g}.arpa"), str(words_txt), str(d), "1")
        show(f"text 4-gram ({frac:g}), pruned to {res['first']}", res)
        rows.append((sum(res["ngrams"]), res))
    syn_words = work / "synthetic_words.txt"
    if not (args.reuse and (work / "synthetic.arpa").exists()):
        res = child("synthetic", str(work / "synthetic.arpa"), str(syn_words),
                    str(args.synthetic), str(args.vocab))
        show(f"making the synthetic ARPA ({args.vocab} words)", res)
    d = work / "lang_synthetic"
    d.mkdir(exist_ok=True)
    res = child("lm", str(work / "synthetic.arpa"), str(syn_words), str(d), "1")
    show(f"synthetic 4-gram, pruned to {res['first']}", res)
    rows.append((sum(res["ngrams"]), res))
    for n, r in rows:
        print(f"    {n:>10,} n-grams: store {r['store_bytes'] / 1e6:7.1f} MB = "
              f"{r['store_bytes'] / n:5.1f} bytes per n-gram")

    if not (args.no_kaldingram or args.reuse):
        print("\n== 3. pruning the full-text 4-gram: asrtrain against kaldingram ==")
        threshold = 1e-6
        show(f"asrtrain, threshold {threshold:g}",
             child("ours-prune", str(work / "ours_1.arpa"), str(words_txt), str(threshold)))
        show(f"kaldingram, threshold {threshold:g}",
             child("kng-prune", str(work / "ours_1.arpa"), str(threshold), str(work / "kng_pruned.arpa")))
    extrapolate(rows)


if __name__ == "__main__":
    main()
