"""The pieces without a model: word confidences from lattice posteriors (against brute force
over every path), the manifest's checks. Cutting at pauses: test_transcribe_segment.py."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from asrtrain.core.errors import AsrtrainError
from asrtrain.transcribe import manifest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "decode"))
from hand_lattices import all_paths, path_cost, random_lattice  # noqa: E402


@pytest.mark.parametrize("seed", range(6))
def test_confidences_are_summed_path_posteriors(seed: int):
    """Each best-path word's confidence is the expected number of same-word arcs
    overlapping it on a path drawn from the lattice's posterior (capped at 1)."""
    from asrtrain.transcribe.confidence import arc_posteriors, best_arcs, word_confidences

    lat = random_lattice(np.random.default_rng(seed))
    lmwt, wip = 10.0, 0.5
    paths = list(all_paths(lat))
    costs = np.array([path_cost(lat, arcs, end, lmwt, wip) for arcs, end in paths])
    weights = np.exp(-(costs - costs.min()))
    weights /= weights.sum()
    post = arc_posteriors(lat, lmwt, wip)
    for a in range(lat.num_arcs):
        assert post[a] == pytest.approx(sum(w for w, (arcs, _) in zip(weights, paths, strict=True)
                                            if a in arcs), abs=1e-9)
    found = best_arcs(lat, lmwt, wip)
    assert found is not None
    arcs, path = found
    assert path.cost == pytest.approx(costs.min(), rel=1e-6)
    times = lat.state_times()
    span = {a: (times[lat.src[a]], times[lat.src[a]] + max(len(lat.arc_string(a)), 1))
            for a in range(lat.num_arcs)}  # a word arc without frames covers the one it starts at
    expected = []
    for a in (a for a in arcs if lat.word[a]):
        def hits(p: list[int], a: int = a) -> int:
            return sum(1 for b in p if lat.word[b] == lat.word[a]
                       and span[b][0] < span[a][1] and span[b][1] > span[a][0])
        expected.append(min(1.0, sum(w * hits(p) for w, (p, _) in zip(weights, paths, strict=True))))
    got = word_confidences(lat, arcs, lmwt, wip)
    assert got == pytest.approx(expected, abs=1e-9)
    assert all(0.0 <= c <= 1.0 and math.isfinite(c) for c in got)


def test_the_manifest_names_the_first_difference(tmp_path: Path):
    (tmp_path / "a").write_text("one\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub/b").write_bytes(b"\x00\x01")
    data = manifest.build(tmp_path, ["a", "sub/b"], {})
    (tmp_path / manifest.MANIFEST).write_text(json.dumps(data))
    assert manifest.verify(tmp_path)["files"]["sub/b"]["bytes"] == 2
    (tmp_path / "sub/b").write_bytes(b"\x00\x02")
    with pytest.raises(AsrtrainError, match="damaged model: sub/b differs"):
        manifest.verify(tmp_path)
    data["files"]["../etc/passwd"] = data["files"].pop("sub/b")
    (tmp_path / manifest.MANIFEST).write_text(json.dumps(data))
    with pytest.raises(AsrtrainError, match="outside the model directory"):
        manifest.verify(tmp_path)
    (tmp_path / manifest.MANIFEST).write_text("{not json")
    with pytest.raises(AsrtrainError, match="manifest.json is damaged"):
        manifest.verify(tmp_path)
