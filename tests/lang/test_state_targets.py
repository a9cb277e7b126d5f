"""Targets at the aligner's resolution: HMM states from state.scp, even split without it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asrtrain.adapt.featio import write_int_vectors
from asrtrain.core.errors import InputError
from asrtrain.lang.hmm import FrameAlignment, estimate_topology, state_split
from asrtrain.lang.pdf_ali import phone_to_pdf, read_split
from asrtrain.lang.tree import build_tree, context_counts

SIL, A, D = 1, 2, 3


def _utt(rng) -> FrameAlignment:
    """sil, A with a long first state, D D (two in a row), sil: the states an aligner gives."""
    phones, states = [], []
    for phone, lengths in [(SIL, (2, 1, 1)), (A, (rng.integers(4, 8), 1, 1)),
                           (D, (1, 1, rng.integers(2, 5))), (D, (1, 2, 1)), (SIL, (1, 1, 2))]:
        for s, n in enumerate(lengths):
            phones += [phone] * int(n)
            states += [s] * int(n)
    return FrameAlignment(np.array(phones), (), np.array(states))


def test_a_state_reset_starts_a_new_phone_where_equal_phones_meet() -> None:
    ali = _utt(np.random.default_rng(0))
    assert [p for p, _, _ in ali.segments()] == [SIL, A, D, D, SIL]
    assert [p for p, _, _ in FrameAlignment(ali.phones).segments()] == [SIL, A, D, SIL]


def test_topology_tree_and_targets_follow_the_aligners_states() -> None:
    rng = np.random.default_rng(1)
    alis = [_utt(rng) for _ in range(30)]
    topo = estimate_topology(alis, [SIL, A, D], sil_phones=[SIL])
    even = estimate_topology([FrameAlignment(a.phones) for a in alis], [SIL, A, D], sil_phones=[SIL])
    # A stays 4-7 frames in its first state and one in the others: the aligner's states
    # give state 0 a long self-loop and state 1 none beyond the prior; the even split cannot
    assert topo.self_loop(A, 0) > 0.7 > even.self_loop(A, 0)
    assert topo.self_loop(A, 1) < 0.1 < even.self_loop(A, 1)
    tree, _ = build_tree(alis, topo, ci_phones=[SIL], num_pdfs=30)
    for ali in alis:
        pdfs = phone_to_pdf(ali, tree)
        assert [tree.pdf_info[p] for p in pdfs] == list(zip(ali.phones.tolist(), ali.states.tolist(), strict=True))
    counts = context_counts(alis, topo)
    assert sum(counts.values()) == sum(len(a.phones) for a in alis)


def test_a_state_outside_the_topology_is_an_error_naming_the_utterance() -> None:
    topo = estimate_topology([np.array([1, 1, 1])], [1], states=2)
    ali = FrameAlignment(np.array([1, 1, 1]), (), np.array([0, 1, 2]), "u7")
    with pytest.raises(InputError, match="utterance u7: frame 2 is in HMM state 2 .* 2 states"):
        context_counts([ali], topo)


def _ali_dir(root: Path, states: dict[str, np.ndarray] | None, ctm: bool = True) -> Path:
    """Phone alignments of two utterances, with ``states`` and a phone.ctm where asked."""
    d = root / "train"
    d.mkdir(parents=True)
    phones = {"u1": np.array([1, 1, 1, 2, 2, 2, 2]), "u2": np.array([1, 1, 1])}
    write_int_vectors(d / "ali", sorted(phones.items()))
    if ctm:  # frame f starts at f * 10 ms + 12.5 ms (read_ctm_cuts' centre)
        (d / "phone.ctm").write_text("u1 1 0.0125 0.03 1\nu1 1 0.0425 0.04 2\nu2 1 0.0125 0.03 1\n")
    if states is not None:
        write_int_vectors(d / "state", sorted(states.items()))
    return root


def test_read_split_takes_states_where_written_and_refuses_what_does_not_fit(tmp_path) -> None:
    states = {"u1": np.array([0, 1, 2, 0, 0, 1, 2]), "u2": np.array([0, 1, 2])}
    root = _ali_dir(tmp_path / "a", states)
    got = {a.utt: a for a in read_split(root, "train")}
    assert got["u1"].states.tolist() == states["u1"].tolist()
    assert all(a.states is None for a in read_split(root, "train", "even"))
    plain = _ali_dir(tmp_path / "b", None)
    assert all(a.states is None for a in read_split(plain, "train"))   # auto: even split
    with pytest.raises(InputError, match="targets 'states' need the aligner's HMM states"):
        list(read_split(plain, "train", "states"))
    short = _ali_dir(tmp_path / "c", {"u1": states["u1"][:5], "u2": states["u2"]})
    with pytest.raises(InputError, match=r"state.scp: utterance u1: HMM states 5 frames, ali.scp has 7"):
        list(read_split(short, "train"))
    missing = _ali_dir(tmp_path / "d", {"u1": states["u1"]})
    with pytest.raises(InputError, match="utterance u2: HMM states missing"):
        list(read_split(missing, "train"))
    # the states alone say where phones start; neither them nor a phone.ctm is refused
    assert [a.utt for a in read_split(_ali_dir(tmp_path / "e", states, ctm=False), "train")] == ["u1", "u2"]
    with pytest.raises(InputError, match="phone.ctm: not found, and no aligner's states"):
        list(read_split(_ali_dir(tmp_path / "f", states, ctm=False), "train", "even"))


def test_phone_only_alignments_keep_the_even_split() -> None:
    ali = np.array([1, 1, 1, 2, 2, 2, 2, 2, 1])
    topo = estimate_topology([ali], [1, 2], sil_phones=[1])
    tree, _ = build_tree([ali], topo, ci_phones=[1], num_pdfs=6)
    got = [tree.pdf_info[p][1] for p in phone_to_pdf(ali, tree)[3:8]]
    assert got == state_split(5, 3).tolist()
