"""Per-utterance alignment graphs: every pronunciation, optional silence, phone contexts."""

from __future__ import annotations

import itertools

import pytest

from asrtrain.align.graph import END, START, expand, phone_dag
from asrtrain.align.hmm import MonoPdfs, Transitions, TreePdfs
from asrtrain.lang.hmm import Topology
from asrtrain.lang.tree import ContextTree

SIL = 1
PRONS = [[(5, 6)], [(7,), (8, 9)]]     # word 0 one pronunciation, word 1 two


def fst_paths(graph) -> list[list[int]]:
    """Label sequences of every path (self-loops skipped: the graph is then acyclic)."""
    arcs: dict[int, list[tuple[int, int]]] = {}
    finals = set()
    for line in graph.fst.to_str().splitlines():
        p = line.split()
        if len(p) >= 4:
            src, dst, label = int(p[0]), int(p[1]), int(p[2])
            if src != dst:
                arcs.setdefault(src, []).append((dst, label))
        elif p:
            finals.add(int(p[0]))
    out = []

    def walk(state: int, labels: list[int]) -> None:
        if state in finals:
            out.append(labels)
        for dst, label in arcs.get(state, []):
            walk(dst, labels + [label])

    walk(graph.fst.start, [])
    return out


def phones_of(graph, labels: list[int]) -> list[tuple[int, int, int]]:
    """(occurrence, instance, state) per label; the phone sequence by instance."""
    return [(int(graph.occurrence[x - 1]), int(graph.instance[x - 1]), int(graph.state[x - 1]))
            for x in labels]


def expected_sequences() -> set[tuple[int, ...]]:
    out = set()
    for pron in PRONS[1]:
        for s0, s1, s2 in itertools.product((0, 1), repeat=3):
            seq = [SIL] * s0 + [5, 6] + [SIL] * s1 + list(pron) + [SIL] * s2
            out.add(tuple(seq))
    return out


def test_the_dag_has_optional_silences_and_every_pronunciation() -> None:
    dag = phone_dag(PRONS, SIL)
    assert dag.first_path == [SIL, 5, 6, 7, SIL]
    assert sum(1 for p in dag.phones if p == SIL) == 3
    assert any(a == START for a, _, _ in dag.edges) and any(b == END for _, b, _ in dag.edges)


@pytest.mark.parametrize("context", [False, True])
def test_graph_paths_are_exactly_the_transcripts_readings(context: bool) -> None:
    dag = phone_dag(PRONS, SIL)
    phones = [1, 5, 6, 7, 8, 9]
    if context:
        topo = Topology({p: 3 for p in phones}, {p: [{}] * 3 for p in phones})
        tree = ContextTree(topo=topo, ci_phones=[SIL])
        for p in phones:
            for s in range(3):
                tree.ci[(p, s)] = len(tree.pdf_info)
                tree.pdf_info.append((p, s))
        pdfs = TreePdfs(tree)
    else:
        pdfs = MonoPdfs(phones)
    graph = expand(dag, pdfs, Transitions.initial(phones).self_loop)
    seqs = set()
    for labels in fst_paths(graph):
        steps = phones_of(graph, labels)
        assert [s for _, _, s in steps] == [0, 1, 2] * (len(steps) // 3)   # 3 states each
        occs = [o for o, _, s in steps if s == 0]
        seq = [dag.phones[o] for o in occs]
        seqs.add(tuple(seq))
    assert seqs == expected_sequences()
    assert graph.min_frames == 3 * 3      # 5 6 7: the shortest reading, no silence


def test_triphone_instances_carry_their_path_neighbours() -> None:
    dag = phone_dag(PRONS, SIL)
    phones = [1, 5, 6, 7, 8, 9]

    class Recording(MonoPdfs):
        def __post_init__(self) -> None:
            super().__post_init__()
            self.keys: list[tuple[int, int, int, int]] = []

        def pdf(self, left: int, phone: int, right: int, state: int) -> int:
            self.keys.append((left, phone, right, state))
            return len(self.keys) - 1

    pdfs = Recording(phones, context_dependent=True)
    graph = expand(dag, pdfs, Transitions.initial(phones).self_loop)
    for labels in fst_paths(graph):
        firsts = [x for x in labels if graph.state[x - 1] == 0]
        keys = [pdfs.keys[graph.pdf[x - 1]] for x in firsts]
        seq = [k[1] for k in keys]
        for i, (left, _phone, right, _) in enumerate(keys):
            assert left == (seq[i - 1] if i else 0)
            assert right == (seq[i + 1] if i + 1 < len(seq) else 0)
