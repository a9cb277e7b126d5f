"""A truncated Kaldi file is reported as truncated, naming it, wherever it is read.

A copy cut short (a full disk, a killed rsync) makes kaldiio and numpy fail with words about
buffers and shapes that depend on where the file ends. Each reader says instead: this file
is truncated, this entry runs past its end. (Features through ``prepare archive``:
test_bad_data.py.)
"""

from __future__ import annotations

import kaldiio
import numpy as np
import pytest

from asrtrain.adapt.lda import load_lda
from asrtrain.core.errors import InputError
from asrtrain.data.kaldi_read import load_entry, open_scp, truncated_ark
from asrtrain.lang.pdf_ali import read_alignments


def cut(path, n: int) -> None:
    """Drop the last ``n`` bytes of ``path``."""
    path.write_bytes(path.read_bytes()[:-n])


@pytest.mark.parametrize("compression", [None, 2])
@pytest.mark.parametrize("n", [1, 9, 300])
def test_a_cut_feature_ark_is_truncated_not_a_numpy_error(tmp_path, compression, n) -> None:
    rng = np.random.default_rng(0)
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'f.ark'},{tmp_path / 'f.scp'}",
                             compression_method=compression) as w:
        for i in range(3):
            w(f"u{i}", rng.normal(size=(40, 13)).astype(np.float32))
    cut(tmp_path / "f.ark", n)
    table = open_scp(tmp_path / "f.scp")
    load_entry(table, "u0", tmp_path / "f.scp")
    with pytest.raises(InputError) as info:
        load_entry(table, "u2", tmp_path / "f.scp")
    size = (tmp_path / "f.ark").stat().st_size
    assert f"{tmp_path / 'f.ark'} is truncated: the entry at offset" in str(info.value)
    assert f"runs past its end ({size} bytes)" in str(info.value)
    assert str(info.value).startswith(f"{tmp_path / 'f.scp'}: utterance 'u2'")


def test_a_corrupt_entry_is_not_called_truncated(tmp_path) -> None:
    kaldiio.save_ark(str(tmp_path / "f.ark"), {"u0": np.zeros((4, 3), np.float32)},
                     scp=str(tmp_path / "f.scp"))
    data = bytearray((tmp_path / "f.ark").read_bytes())
    at = data.index(b"FM ")
    data[at:at + 3] = b"ZZ "
    (tmp_path / "f.ark").write_bytes(bytes(data))
    assert truncated_ark(f"{tmp_path / 'f.ark'}:3") is None
    with pytest.raises(InputError, match="Unexpected format") as info:
        load_entry(open_scp(tmp_path / "f.scp"), "u0", tmp_path / "f.scp")
    assert "truncated" not in str(info.value)


def test_cut_alignments_name_the_utterance_and_the_ark(tmp_path) -> None:
    alis = {f"u{i}": np.arange(30, dtype=np.int32) % 5 for i in range(3)}
    kaldiio.save_ark(str(tmp_path / "ali.ark"), alis, scp=str(tmp_path / "ali.scp"))
    cut(tmp_path / "ali.ark", 6)
    with pytest.raises(InputError) as info:
        list(read_alignments(tmp_path / "ali.scp"))
    line = str(info.value)
    assert line.startswith(f"{tmp_path / 'ali.scp'}: cannot read alignments: utterance 'u2' (")
    assert f"{tmp_path / 'ali.ark'} is truncated" in line and "\n" not in line


def test_a_cut_lda_matrix_is_truncated(tmp_path) -> None:
    path = tmp_path / "lda.mat"
    kaldiio.save_mat(str(path), np.ones((40, 117), np.float32))
    cut(path, 100)
    with pytest.raises(InputError, match=rf"lda.mat: not a Kaldi matrix: {path} is truncated"):
        load_lda(path)
