"""The HDF5 archive: layout, exact contents, statistics, skips, errors, atomic writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from feature_helpers import make_streams, utt_index

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.archive import Archive
from asrtrain.data.archive_writer import write_archive
from asrtrain.data.fuse import Stream

LENGTHS = [5, 21, 22, 60, 1, 43, 17]


def build(tmp_path: Path, lengths: list[int] = LENGTHS, ali: bool = True, chunk: int = 21,
          **kw: object) -> tuple[Archive, dict[str, object], dict[str, object]]:
    src = make_streams(tmp_path / "src", lengths)
    streams = [Stream("a", src["a_scp"]), Stream("iv", src["iv_scp"]), Stream("b", src["b_scp"])]
    summary = write_archive(tmp_path / "x.h5", streams, str(src["ali_scp"]) if ali else None,
                            7, chunk=chunk, **kw)  # num_pdfs without alignments is ignored
    return Archive(tmp_path / "x.h5"), src, summary


def expected_input(src: dict, utt: str) -> np.ndarray:
    frames = src["a"][utt].shape[0]
    x = np.concatenate([src["a"][utt], np.tile(src["iv"][utt], (frames, 1)), src["b"][utt]], 1)
    return x.astype(np.float16).astype(np.float32)


def test_header_layout_and_index(tmp_path: Path) -> None:
    arc, src, summary = build(tmp_path)
    assert arc.chunk == 21 and arc.feat_dim == 6 + 3 + 4 and arc.num_pdfs == 7
    assert [(s["name"], s["dim"], s["offset"], s["kind"]) for s in arc.layout] == [
        ("a", 6, 0, "frame"), ("iv", 3, 6, "utterance"), ("b", 4, 9, "frame")]
    utts = sorted(src["a"])
    lengths = [LENGTHS[utt_index(u)] for u in utts]
    chunks = [-(-n // 21) for n in lengths]
    assert arc.num_chunks == sum(chunks) == summary["chunks"]
    assert arc.num_frames == sum(LENGTHS)
    firsts = np.concatenate([[0], np.cumsum(chunks)[:-1]]).tolist()
    assert arc.utterances == [(u, f, c, n) for u, f, c, n in
                              zip(utts, firsts, chunks, lengths, strict=True)]
    head = arc.header
    assert head["format"] == "asrtrain-archive" and head["format_version"] == 2
    assert head["skipped"] == [] and head["fingerprint"]["packages"]["h5py"]
    assert head["fingerprint"]["layout"] == arc.layout


def test_contents_are_exact_and_padding_is_marked(tmp_path: Path) -> None:
    arc, src, _ = build(tmp_path)
    for utt, first, count, frames in arc.utterances:
        x, y = arc.read_utterance(utt)
        np.testing.assert_array_equal(x, expected_input(src, utt))
        np.testing.assert_array_equal(y, src["ali"][utt])
        feats, targets = arc.read_chunks(first, first + count)
        assert feats.dtype == np.float16 and targets.dtype == np.int32
        assert (targets.reshape(-1)[frames:] == -1).all()
        assert (feats.reshape(-1, arc.feat_dim)[frames:] == 0).all()
        assert (targets.reshape(-1)[:frames] >= 0).all()
    assert arc.h5["chunk_frames"][...].sum() == sum(LENGTHS)


def test_priors_mean_and_var(tmp_path: Path) -> None:
    arc, src, _ = build(tmp_path)
    everything = np.concatenate([expected_input(src, u) for u in sorted(src["a"])]).astype(np.float64)
    np.testing.assert_allclose(arc.mean, everything.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(arc.var, everything.var(0), rtol=1e-5, atol=1e-6)
    counts = np.bincount(np.concatenate(list(src["ali"].values())), minlength=7)
    np.testing.assert_array_equal(arc.priors, counts)
    assert arc.priors.dtype == np.float64 and arc.mean.dtype == np.float32


def test_storage_chunk_boundaries_do_not_matter(tmp_path: Path) -> None:
    lengths = [int(n) for n in np.random.default_rng(3).integers(1, 90, 40)]
    arc, src, _ = build(tmp_path, lengths, storage_chunks=4)
    assert arc.storage_chunks == 4
    for utt, *_ in arc.utterances:
        np.testing.assert_array_equal(arc.read_utterance(utt)[0], expected_input(src, utt))


def test_without_alignments_there_are_no_targets(tmp_path: Path) -> None:
    arc, _, _ = build(tmp_path, ali=False)
    assert arc.num_pdfs is None and arc.priors is None and not arc.has_targets
    feats, targets = arc.read_chunks(0, 2)
    assert targets is None and feats.shape == (2, 21, 13)


def test_skips_are_counted_and_named(tmp_path: Path) -> None:
    import kaldiio

    src = make_streams(tmp_path / "src", [30, 30, 30, 30, 30])
    utts = sorted(src["a"])
    b = dict(src["b"])
    b[utts[1]] = b[utts[1]][:25]  # 5 frames short: beyond tolerance
    b[utts[2]] = b[utts[2]][:28]  # 2 short: trimmed
    del b[utts[3]]  # missing in a stream
    kaldiio.save_ark(str(tmp_path / "b.ark"), b, scp=str(tmp_path / "b.scp"))
    ali = {u: v for u, v in src["ali"].items() if u != utts[4]}
    kaldiio.save_ark(str(tmp_path / "l.ark"), ali, scp=str(tmp_path / "l.scp"))
    summary = write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"]),
                                                Stream("b", tmp_path / "b.scp")],
                            str(tmp_path / "l.scp"), 7)
    arc = Archive(tmp_path / "x.h5")
    expected = {utts[1]: "length mismatch beyond tolerance 2: a 30, b 25",
                utts[3]: "missing in stream b", utts[4]: "no alignment"}
    assert summary["skipped"] == expected
    assert dict(arc.skipped) == expected and arc.header["num_skipped"] == 3
    assert [u[0] for u in arc.utterances] == [utts[0], utts[2]]
    assert arc.utterances[1][3] == 28
    np.testing.assert_array_equal(arc.read_utterance(utts[2])[1], src["ali"][utts[2]][:28])


def test_a_held_out_set_keeps_unaligned_utterances_for_decoding_not_for_its_loss(tmp_path: Path) -> None:
    """A dev utterance the aligner missed is decoded (its words are not scored as deletions)
    while the held-out loss, frames and priors are those of the archive that skips it."""
    import kaldiio
    import torch

    from asrtrain.model.blstm import BLSTM
    from asrtrain.model.config import ModelConfig
    from asrtrain.train.validate import evaluate

    src = make_streams(tmp_path / "src", [30, 45, 12])
    utts = sorted(src["a"])
    ali = {u: v for u, v in src["ali"].items() if u != utts[1]}
    kaldiio.save_ark(str(tmp_path / "l.ark"), ali, scp=str(tmp_path / "l.scp"))
    stream = [Stream("a", src["a_scp"])]
    write_archive(tmp_path / "skip.h5", stream, str(tmp_path / "l.scp"), 7)
    summary = write_archive(tmp_path / "keep.h5", stream, str(tmp_path / "l.scp"), 7, unaligned="keep")
    skip, keep = Archive(tmp_path / "skip.h5"), Archive(tmp_path / "keep.h5")
    assert summary["unaligned"] == [utts[1]] and summary["skipped"] == {}
    assert keep.header["num_unaligned"] == 1 and skip.header["num_unaligned"] == 0
    assert [u[0] for u in keep.utterances] == utts and dict(skip.skipped) == {utts[1]: "no alignment"}
    feats, targets = keep.read_utterance(utts[1])
    np.testing.assert_array_equal(feats, src["a"][utts[1]].astype(np.float16).astype(np.float32))
    assert (targets < 0).all()
    np.testing.assert_array_equal(keep.priors, skip.priors)
    torch.manual_seed(0)
    model = BLSTM(ModelConfig(input_dim=6, hidden=4, layers=1, proj=0, num_pdfs=7))
    kept, skipped = (evaluate(model, a, 2, torch.device("cpu"), None) for a in (keep, skip))
    assert kept[1:] == skipped[1:] == [42.0, kept[2]]
    assert kept[0] == pytest.approx(skipped[0], rel=1e-6)
    with pytest.raises(ConfigError, match="--unaligned is skip or keep"):
        write_archive(tmp_path / "bad.h5", stream, str(tmp_path / "l.scp"), 7, unaligned="drop")


def test_alignment_length_tolerance(tmp_path: Path) -> None:
    import kaldiio

    src = make_streams(tmp_path / "src", [30, 30])
    utts = sorted(src["a"])
    ali = {utts[0]: src["ali"][utts[0]][:29], utts[1]: src["ali"][utts[1]][:20]}
    kaldiio.save_ark(str(tmp_path / "l.ark"), ali, scp=str(tmp_path / "l.scp"))
    summary = write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"])],
                            str(tmp_path / "l.scp"), 7)
    assert summary["skipped"] == {utts[1]: "alignment has 20 frames, features 30 (tolerance 2)"}
    assert Archive(tmp_path / "x.h5").utterances[0][3] == 29


def test_target_out_of_range_is_an_error_and_leaves_no_file(tmp_path: Path) -> None:
    src = make_streams(tmp_path / "src", [10, 10, 10], num_pdfs=9)
    with pytest.raises(InputError, match=r"ali.scp: utterance 'spk\d-u\d+': target [78] at frame "
                                         r"\d+ is outside \[0, 7\)"):
        write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"])], str(src["ali_scp"]), 7)
    assert list(tmp_path.iterdir()) == [tmp_path / "src"]


def test_failed_rewrite_keeps_the_old_archive(tmp_path: Path) -> None:
    arc, src, _ = build(tmp_path)
    before = (tmp_path / "x.h5").read_bytes()
    arc.close()
    with pytest.raises(ConfigError, match="--ali needs --num-pdfs"):
        write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"])], str(src["ali_scp"]), None)
    with pytest.raises(InputError, match="no utterance is in every stream"):
        other = make_streams(tmp_path / "other", [4])
        import kaldiio
        kaldiio.save_ark(str(tmp_path / "o.ark"), {"zz-u9": other["a"]["spk0-u0000"]},
                         scp=str(tmp_path / "o.scp"))
        write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"]), Stream("o", tmp_path / "o.scp")])
    assert (tmp_path / "x.h5").read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".x.h5")]


def test_paper_layout_is_260_columns(tmp_path: Path) -> None:
    import kaldiio

    rng = np.random.default_rng(0)
    tables: dict[str, dict[str, np.ndarray]] = {"fmllr": {}, "ivector": {}, "logmel": {}}
    for i, frames in enumerate([50, 73]):
        utt = f"spk-{i}"
        tables["fmllr"][utt] = rng.normal(size=(frames, 40)).astype(np.float32)
        tables["ivector"][utt] = rng.normal(size=(-(-frames // 10), 100)).astype(np.float32)
        tables["logmel"][utt] = rng.normal(size=(frames + 1, 120)).astype(np.float32)
    streams = []
    for name, table in tables.items():
        (tmp_path / name).mkdir()
        scp = tmp_path / name / "feats.scp"
        kaldiio.save_ark(str(tmp_path / name / "feats.ark"), table, scp=str(scp))
        streams.append(Stream(name, scp, period=10 if name == "ivector" else None))
    write_archive(tmp_path / "x.h5", streams)
    arc = Archive(tmp_path / "x.h5")
    assert arc.feat_dim == 260
    assert [(s["name"], s["offset"], s["kind"]) for s in arc.layout] == [
        ("fmllr", 0, "frame"), ("ivector", 40, "online"), ("logmel", 140, "frame")]
    x, _ = arc.read_utterance("spk-1")
    assert x.shape == (73, 260)
    iv = tables["ivector"]["spk-1"].astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(x[35, 40:140], iv[3])
    np.testing.assert_array_equal(x[72, 140:], tables["logmel"]["spk-1"][72].astype(np.float16))


def test_not_an_archive(tmp_path: Path) -> None:
    import h5py

    with h5py.File(tmp_path / "other.h5", "w") as h5:
        h5["x"] = np.zeros(3)
    with pytest.raises(InputError, match="not an asrtrain archive"):
        _ = Archive(tmp_path / "other.h5").num_chunks
    (tmp_path / "text.h5").write_text("hello")
    with pytest.raises(InputError, match="not an HDF5 file"):
        _ = Archive(tmp_path / "text.h5").chunk


def test_archive_records_the_tree_of_its_targets(tmp_path: Path) -> None:
    """``tree_id`` beside the pdf alignments travels into the header (and so into final.pt),
    where decode checks it against the graph's."""
    import kaldiio

    from asrtrain.data.archive import Archive
    from asrtrain.data.archive_writer import write_archive
    from asrtrain.data.fuse import Stream
    from asrtrain.decode.loglikes import model_tree_id

    rng = np.random.default_rng(0)
    ali_dir = tmp_path / "pdf_ali"
    ali_dir.mkdir()
    with kaldiio.WriteHelper(f"ark,scp:{tmp_path / 'f.ark'},{tmp_path / 'f.scp'}") as fw, \
            kaldiio.WriteHelper(f"ark,scp:{ali_dir / 'a.ark'},{ali_dir / 'a.scp'}") as aw:
        for utt in ("u1", "u2"):
            fw(utt, rng.normal(size=(30, 4)).astype(np.float32))
            aw(utt, rng.integers(0, 5, size=30).astype(np.int32))
    write_archive(tmp_path / "no_tree.h5", [Stream("f", tmp_path / "f.scp")],
                  ali_scp=str(ali_dir / "a.scp"), num_pdfs=5)
    assert "tree_id" not in Archive(tmp_path / "no_tree.h5").header
    (ali_dir / "tree_id").write_text("0123456789abcdef\n")
    write_archive(tmp_path / "a.h5", [Stream("f", tmp_path / "f.scp")],
                  ali_scp=str(ali_dir / "a.scp"), num_pdfs=5)
    header = Archive(tmp_path / "a.h5").header
    assert header["tree_id"] == "0123456789abcdef"
    assert model_tree_id({"tree_id": header["tree_id"]}) == "0123456789abcdef"


def test_alignments_of_other_utterances_are_one_line_with_the_reasons(tmp_path: Path) -> None:
    src = make_streams(tmp_path / "src", [10, 12])
    other = make_streams(tmp_path / "other", [10, 12])
    (other["ali_scp"]).write_text(Path(other["ali_scp"]).read_text().replace("spk", "zz"))
    with pytest.raises(InputError, match=r"no utterance could be used: 2 no alignment, 2 alignment only"):
        write_archive(tmp_path / "x.h5", [Stream("a", src["a_scp"])], str(other["ali_scp"]), 7)
    assert not (tmp_path / "x.h5").exists()
