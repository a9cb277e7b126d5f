"""``prepare gmm-graph``: HCLG on an aligner rung's tree, for decoding with its GMMs.

The lang dir's own HCLG is built on the hybrid's tree (``prepare lang --num-pdfs``); the
ladder's rungs have trees of their own (mono: one pdf per phone state; tri, LDA+MLLT and
SAT share the triphone tree). Kaldi's recipes report each rung's WER with a graph made
for it (``utils/mkgraph.sh data/lang exp/tri3 exp/tri3/graph``): this is that step, the
same L and G as the lang dir, the rung's tree and HMM.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines, read_text

log = logging.getLogger("asrtrain.lang")
NEEDED = ("L_disambig.fst", "G.fst", "phones.txt", "words.txt", "align_lexicon.txt",
          "disambig_phones.int")


def check_phones(lang: Path, phones: dict[int, str], model: Path) -> str:
    """The lang's phone table must give every phone of the rung the rung's id; returns
    the silence phone's name."""
    from asrtrain.lang.lexicon import read_symbols

    table = read_symbols(lang / "phones.txt")
    for i, name in sorted(phones.items()):
        if table.get(name) != i:
            raise InputError(f"phone {name!r} is {i} in the model and "
                             f"{table.get(name, 'absent')} in {lang / 'phones.txt'}: the model "
                             "was aligned with another phone set", model)
    return "sil" if "sil" in phones.values() else sorted(phones.values())[0]


def build_gmm_graph(lang: Path, model: Path, out: Path) -> dict:
    """Write ``out`` (a graph dir as ``prepare lang`` writes ``graph/``) for ``model``."""
    import kaldifst

    from asrtrain.align.saved import load_rung
    from asrtrain.lang import graph as graphs

    t0 = time.time()
    lang, out = Path(lang), Path(out)
    for name in NEEDED:
        if not (lang / name).exists():
            raise InputError(f"not a lang dir of prepare lang: {name} is missing", lang)
    rung = load_rung(model)
    silence = check_phones(lang, rung.phones, model)
    lang_info = json.loads(read_text(lang / "graph" / "info.json")) \
        if (lang / "graph" / "info.json").exists() else {}
    silence = str(lang_info.get("silence", silence))
    disambig = [int(x) for x in read_lines(lang / "disambig_phones.int") if x.strip()]
    sizes: dict[str, tuple[int, int]] = {}
    L = kaldifst.StdVectorFst.read(str(lang / "L_disambig.fst"))
    G = kaldifst.StdVectorFst.read(str(lang / "G.fst"))
    sizes["G"] = graphs.size(G)
    lg = graphs.build_lg(L, G)
    del L, G
    sizes["LG"] = graphs.size(lg)
    hclg = graphs.build_hclg(lg, rung.tree, disambig, sizes)
    del lg
    graphs.write_graph_dir(out, hclg, lang, rung.tree, silence, sizes,
                           extra={"model": str(Path(model).resolve()), "rung": rung.name})
    figures = {"rung": rung.name, "num_pdfs": rung.tree.num_pdfs, "tree_id": rung.tree_id,
               "sizes": sizes, "seconds": round(time.time() - t0, 1)}
    log.info("%s graph for %s (%d pdfs): HCLG %d states, %d arcs in %.1fs", rung.name, model,
             rung.tree.num_pdfs, *sizes["HCLG"], time.time() - t0)
    return figures
