"""The decoding graph directory: ours (``prepare lang``) or Kaldi's (``utils/mkgraph.sh``).

Ours carries the tree (pdf → phone and HMM state) and its id, so decode can refuse a
model of another tree and split the best path into phones for word times. Kaldi's has
transition-id input labels and no tree of ours: the tid→pdf map (``--tid2pdf``) is then
the only link to the model, and the word times come from Kaldi's ``phones/`` files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_text
from asrtrain.decode.kaldi_graph import (
    TidMap,
    read_align_lexicon_int,
    read_tid2pdf,
    read_word_boundary,
)


@dataclass
class GraphInfo:
    """The graph directory: HCLG path, words, tree (pdf → phone/state), identity.

    Ours (``prepare lang``) has info.json, tree and align_lexicon.txt; a Kaldi graph
    (``utils/mkgraph.sh``) has none of them: ``kaldi`` is then True, ``tree_id`` and
    ``pdf_info`` are None, ``num_pdfs`` comes from its ``num_pdfs`` file if any, the
    silence phones from ``phones/word_boundary.int`` and the pronunciations from
    ``phones/align_lexicon.int``.
    """

    path: Path
    num_pdfs: int | None
    tree_id: str | None
    words: dict[int, str]
    pdf_info: list[tuple[int, int]] | None
    silence: set[int]
    prons: dict[str, list[tuple[int, ...]]]
    sizes: dict[str, Any]
    kaldi: bool = False
    phones: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, graph_dir: Path) -> GraphInfo:
        from asrtrain.decode.ctm import read_align_lexicon
        from asrtrain.lang.lexicon import read_symbols

        graph_dir = Path(graph_dir)
        for name in ("HCLG.fst", "words.txt"):
            if not (graph_dir / name).exists():
                raise InputError(f"not a graph directory: {name} is missing", graph_dir)
        if not (graph_dir / "info.json").exists():
            return cls.load_kaldi(graph_dir)
        for name in ("tree", "phones.txt", "align_lexicon.txt"):
            if not (graph_dir / name).exists():
                raise InputError(f"not a graph directory: {name} is missing", graph_dir)
        info = json.loads(read_text(graph_dir / "info.json"))
        tree = json.loads(read_text(graph_dir / "tree"))
        phones = read_symbols(graph_dir / "phones.txt")
        pdf_info = [(int(a), int(b)) for a, b in tree["pdf_info"]]
        if len(pdf_info) != int(info["num_pdfs"]):
            raise InputError(f"tree has {len(pdf_info)} pdfs, info.json says {info['num_pdfs']}",
                             graph_dir)
        return cls(path=graph_dir, num_pdfs=int(info["num_pdfs"]), tree_id=str(info["tree_id"]),
                   words={i: w for w, i in read_symbols(graph_dir / "words.txt").items()},
                   pdf_info=pdf_info, silence={phones[info.get("silence", "sil")]},
                   prons=read_align_lexicon(graph_dir / "align_lexicon.txt", phones),
                   sizes=info.get("sizes", {}), phones=phones)

    @classmethod
    def load_kaldi(cls, graph_dir: Path) -> GraphInfo:
        """A ``utils/mkgraph.sh`` directory (transition-id input labels)."""
        from asrtrain.lang.lexicon import read_symbols

        words = {i: w for w, i in read_symbols(graph_dir / "words.txt").items()}
        phones = read_symbols(graph_dir / "phones.txt") if (graph_dir / "phones.txt").exists() else {}
        num_pdfs = None
        if (graph_dir / "num_pdfs").exists():
            text = read_text(graph_dir / "num_pdfs").strip()
            if not text.isdigit():
                raise InputError(f"expected one integer, got {text!r}", graph_dir / "num_pdfs")
            num_pdfs = int(text)
        boundary, lexicon = graph_dir / "phones/word_boundary.int", graph_dir / "phones/align_lexicon.int"
        silence: set[int] = set()
        prons: dict[str, list[tuple[int, ...]]] = {}
        if boundary.exists() and lexicon.exists():
            silence = {p for p, kind in read_word_boundary(boundary).items() if kind == "nonword"}
            prons = read_align_lexicon_int(lexicon, words)
        return cls(path=graph_dir, num_pdfs=num_pdfs, tree_id=None, words=words, pdf_info=None,
                   silence=silence, prons=prons, sizes={}, kaldi=True, phones=phones)

    def label_info(self, tmap: TidMap | None) -> list[tuple[int, int]] | None:
        """(phone, HMM state) per input label − 1, for CTM times; None: not known."""
        if tmap is None:
            return self.pdf_info
        if self.pdf_info is not None:
            return [self.pdf_info[int(p)] for p in tmap.columns()]
        if tmap.phone_state is not None and self.prons:
            return tmap.phone_state
        return None


def load_tid2pdf(tid2pdf: Path | None, graph: GraphInfo) -> TidMap | None:
    """The transition-id map of ``--tid2pdf`` (None without); a Kaldi graph requires one."""
    if tid2pdf is None:
        if graph.kaldi:
            raise InputError("a Kaldi graph (no info.json) has transition-id input labels: give "
                             "--tid2pdf FILE (lines 'transition-id pdf-id' from show-transitions)",
                             graph.path)
        return None
    return read_tid2pdf(tid2pdf, graph.phones or None)
