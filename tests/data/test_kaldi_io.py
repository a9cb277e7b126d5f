"""What real Kaldi writes reads back right: binary, CM/CM2/CM3 compressed and text arks.

The files in ../shared/data/kaldi were converted by Kaldi's own copy-feats from
test.ark (three float32 10x20 matrices). Each compressed form must decode to the
source within its quantisation step, both through kaldiio and through an archive
built from an scp that points into the Kaldi ark.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from feature_helpers import KALDI_DIR

# (file, largest error as a fraction of the matrix's value range)
FORMS = [
    ("test.ark", 0.0),
    ("test.text.ark", 1e-6),  # printed with 7 significant digits
    ("test.cm3.ark", 1 / 65535),  # CM2: 16 bits over the global range, half a step of error
    ("test.cm5.ark", 1 / 255),  # CM3: 8 bits over the global range
    ("test.cm1.ark", 1 / 128),  # CM: per-column 3-piece quantiser, 64 levels in each outer piece
]

pytestmark = pytest.mark.needs(None if (KALDI_DIR / "test.ark").is_file()
                              else f"the Kaldi test arks are not in {KALDI_DIR} (set ASRTRAIN_SHARED)")


def source() -> dict[str, np.ndarray]:
    import kaldiio

    return {k: np.asarray(v) for k, v in kaldiio.load_ark(str(KALDI_DIR / "test.ark"))}


def scp_into(ark: Path, keys: list[str], out: Path) -> Path:
    """An scp with Kaldi's ``ark:offset`` entries (the byte after ``key ``)."""
    raw = ark.read_bytes()
    lines = []
    for key in keys:
        at = raw.find(key.encode() + b" ")
        assert at >= 0, key
        lines.append(f"{key} {ark.resolve()}:{at + len(key) + 1}\n")
    out.write_text("".join(lines))
    return out


def test_source_is_three_10x20_matrices() -> None:
    src = source()
    assert sorted(src) == ["test0", "test1", "test2"]
    assert all(m.shape == (10, 20) and m.dtype == np.float32 for m in src.values())


@pytest.mark.parametrize("name,tolerance", FORMS)
def test_each_form_decodes_to_the_source(name: str, tolerance: float) -> None:
    import kaldiio

    src = source()
    got = {k: np.asarray(v) for k, v in kaldiio.load_ark(str(KALDI_DIR / name))}
    assert sorted(got) == sorted(src)
    for key, ref in src.items():
        span = float(ref.max() - ref.min())
        err = float(np.abs(got[key] - ref).max())
        assert err <= tolerance * span + 1e-6 * float(np.abs(ref).max()), (name, key, err)
        if name != "test.ark":
            assert got[key].shape == ref.shape


@pytest.mark.parametrize("name,tolerance", FORMS)
def test_archive_from_kaldi_scp_matches_source(tmp_path: Path, name: str, tolerance: float) -> None:
    from asrtrain.data.archive import Archive
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream

    src = source()
    scp = scp_into(KALDI_DIR / name, sorted(src), tmp_path / "feats.scp")
    write_archive(tmp_path / "a.h5", [Stream("feats", scp)], chunk=4)
    arc = Archive(tmp_path / "a.h5")
    assert [u[0] for u in arc.utterances] == sorted(src)
    assert arc.num_chunks == 3 * 3 and arc.feat_dim == 20
    for key, ref in src.items():
        x, y = arc.read_utterance(key)
        assert y is None and x.shape == ref.shape
        half = 2.0 ** -11 * np.abs(ref)  # float16 rounding
        assert (np.abs(x - ref) <= tolerance * float(ref.max() - ref.min()) + half + 1e-6).all()
