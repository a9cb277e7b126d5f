"""A saved rung of the ladder (``prepare align``'s ``models/<stage>.pt``) read back as a
decoder needs it: the GMMs, the front end, and the pdf map as a context tree.

The aligner's HMM is each phone's states with the rung's re-estimated self-loops and a
step to the next state (no early exit), so the tree handed to the graph builder carries
that topology, not the one the tree was first built with: a GMM decodes with the
transitions it was trained with. A monophone rung becomes a tree of context-independent
states only, its pdf ids as the rung numbered them. The tree's identity (a hash of the
whole, topology included) is what graph and scorer agree on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

from asrtrain.align.am import AcousticModel
from asrtrain.align.feats import FrontEnd
from asrtrain.core.errors import InputError
from asrtrain.lang.hmm import Topology
from asrtrain.lang.tree import ContextTree

#: What a rung file may hold besides tensors and containers: numpy scalars (a tree's
#: probabilities in rungs saved before 2026-11-28) and their dtypes; data, never code.
NUMPY_SCALARS: list = [import_module("numpy._core.multiarray").scalar, np.dtype,
                       *(type(np.dtype(t)) for t in ("float64", "float32", "int64", "int32"))]
KEYS = ("name", "model", "pdf_info", "phones", "self_loop", "front")


@dataclass
class SavedRung:
    """One rung: its name, GMMs, front end (no speaker transforms), tree, phone names."""

    name: str
    model: AcousticModel
    front: FrontEnd
    tree: ContextTree
    phones: dict[int, str]
    train_fmllr: dict[str, np.ndarray]

    @property
    def tree_id(self) -> str:
        return self.tree.identity()

    @property
    def silence_pdfs(self) -> np.ndarray:
        """True for the pdfs of the silence phone (``sil``)."""
        sil = {i for i, p in self.phones.items() if p == "sil"}
        return np.array([ph in sil for ph, _ in self.tree.pdf_info])


def load_rung(path: Path) -> SavedRung:
    """Read a rung file; refuse anything else (tensors and plain data only)."""
    import pickle

    import torch

    path = Path(path)
    if not path.is_file():
        raise InputError("no such GMM model file", path)
    try:
        with torch.serialization.safe_globals(NUMPY_SCALARS):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError) as exc:
        raise InputError(f"not a readable model file ({type(exc).__name__})", path) from None
    if not isinstance(state, dict) or any(k not in state for k in KEYS):
        raise InputError("not an aligner model (prepare align's models/<stage>.pt)", path)
    phones = {int(i): str(p) for i, p in state["phones"].items()}
    front_state = state["front"]
    lda = front_state.get("lda")
    front = FrontEnd(deltas=bool(front_state["deltas"]), context=int(front_state["context"]),
                     lda=None if lda is None else np.asarray(lda, dtype=np.float64))
    fmllr = {k: np.asarray(v, dtype=np.float64) for k, v in front_state["fmllr"].items()}
    tree = rung_tree(state)
    model = AcousticModel.from_state(state["model"])
    if model.num_pdfs != tree.num_pdfs:
        raise InputError(f"the model has {model.num_pdfs} pdfs, its tree {tree.num_pdfs}", path)
    return SavedRung(str(state["name"]), model, front, tree, phones, fmllr)


def rung_tree(state: dict[str, Any]) -> ContextTree:
    """The rung's pdf map as a tree whose topology is the rung's own HMM."""
    loops: dict[tuple[int, int], float] = {}
    for key, p in state["self_loop"].items():
        phone, s = (int(x) for x in key.split())
        loops[(phone, s)] = float(p)
    pdf_info = [(int(a), int(b)) for a, b in state["pdf_info"]]
    num_states: dict[int, int] = {}
    for phone, s in pdf_info:
        num_states[phone] = max(num_states.get(phone, 0), s + 1)
    trans = {phone: [_row(loops.get((phone, s), 0.75), s) for s in range(n)]
             for phone, n in sorted(num_states.items())}
    topo = Topology(num_states=num_states, trans=trans)
    if state.get("tree") is not None:
        return replace(ContextTree.from_json(state["tree"]), topo=topo)
    ci = {key: pdf for pdf, key in enumerate(pdf_info)}
    return ContextTree(topo=topo, ci_phones=sorted(num_states), ci=ci, pdf_info=pdf_info)


def _row(self_loop: float, state: int) -> dict[int, float]:
    """A state's moves: stay, or step to the next state (the last one's next is the exit)."""
    return {state: self_loop, state + 1: 1.0 - self_loop}
