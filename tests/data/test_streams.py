"""Choosing an archive's streams by name (``asrtrain train --streams``): exact columns, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from feature_helpers import make_streams

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.data.archive import Archive
from asrtrain.data.archive_writer import write_archive
from asrtrain.data.fuse import Stream
from asrtrain.data.streams import (
    InputSelection,
    model_input,
    parse_streams,
    select_streams,
    whole_input,
)


def _archive(tmp_path: Path, order: tuple[str, ...] = ("a", "iv", "b"), name: str = "x.h5") -> Archive:
    """Streams a (6 columns), iv (3), b (4) in ``order``, from the same source matrices."""
    src = make_streams(tmp_path / "src", [30, 50, 21])
    scp = {"a": src["a_scp"], "iv": src["iv_scp"], "b": src["b_scp"]}
    write_archive(tmp_path / name, [Stream(s, scp[s]) for s in order], str(src["ali_scp"]), 7)
    return Archive(tmp_path / name)


def test_parse_streams() -> None:
    assert parse_streams(None) is None and parse_streams("  ") is None
    assert parse_streams("logmel") == ("logmel",)
    assert parse_streams(" fmllr , logmel") == ("fmllr", "logmel")
    with pytest.raises(ConfigError, match="an empty stream name"):
        parse_streams("fmllr,,logmel")
    with pytest.raises(ConfigError, match="names logmel more than once"):
        parse_streams("logmel,fmllr,logmel")


def test_selection_takes_exactly_the_named_columns_in_archive_order(tmp_path: Path) -> None:
    arc = _archive(tmp_path)
    feats, _ = arc.read_chunks(0, arc.num_chunks)
    whole = select_streams(arc, None)
    assert whole == whole_input(arc) and whole.index is None and not whole.by_name
    assert whole.take(feats) is feats and whole.dim == arc.feat_dim == 13
    # the list's order does not matter: the archive's (a 0-5, iv 6-8, b 9-12) is kept
    chosen = select_streams(arc, ("b", "a"))
    assert chosen.streams == ("a", "b") and chosen.by_name
    assert chosen.columns == (*range(0, 6), *range(9, 13)) and chosen.dim == 10
    np.testing.assert_array_equal(chosen.take(feats), np.concatenate([feats[..., 0:6], feats[..., 9:13]], -1))
    assert select_streams(arc, ("iv",)).take(feats).tolist() == feats[..., 6:9].tolist()
    # every stream by name is all the columns: nothing to copy
    assert select_streams(arc, ("iv", "b", "a")).index is None
    assert chosen.describe() == "a+b (10 of 13 columns)"
    assert InputSelection.from_dict(chosen.to_dict()) == chosen


def test_an_unknown_stream_is_one_error_listing_the_archive_streams(tmp_path: Path) -> None:
    arc = _archive(tmp_path)
    with pytest.raises(ConfigError) as info:
        select_streams(arc, ("a", "logmel"))
    assert str(info.value) == (f"{arc.path}: --streams: no stream 'logmel' in this archive "
                               "(its streams: a, iv, b)")


def test_another_archive_gives_the_same_streams_by_name(tmp_path: Path) -> None:
    train = _archive(tmp_path / "t")
    other = _archive(tmp_path / "o", order=("b", "a", "iv"))  # b 0-3, a 4-9, iv 10-12
    chosen = select_streams(train, ("a", "b"))
    there = chosen.on(other)
    assert there.columns == (*range(4, 10), *range(0, 4)) and there.source_dim == 13
    x_train, _ = train.read_chunks(0, train.num_chunks)
    x_other, _ = other.read_chunks(0, other.num_chunks)
    np.testing.assert_array_equal(chosen.take(x_train), there.take(x_other))  # the same matrices
    # decoding: the model's record picks them; a model without one reads the whole input
    assert model_input({"input": chosen.to_dict()}, other) == there
    assert model_input({}, other) == whole_input(other)
    # the whole input is taken whole (by width), whatever the names
    assert select_streams(train, None).on(other) == whole_input(other)
    lacking = _archive(tmp_path / "l", order=("a", "iv"))
    with pytest.raises(InputError) as info:
        model_input({"input": chosen.to_dict()}, lacking)
    assert str(info.value) == (f"{lacking.path}: the model reads stream 'b', which this decoding archive "
                               "does not have (its streams: a, iv)")


def test_a_resumed_run_must_read_the_same_columns(tmp_path: Path) -> None:
    arc = _archive(tmp_path)
    chosen = select_streams(arc, ("a",))
    assert chosen.same_input(chosen.to_dict())
    assert not chosen.same_input(select_streams(arc, ("a", "b")).to_dict())
    assert not chosen.same_input(None)  # a checkpoint from before the record: the whole input
    assert whole_input(arc).same_input(None) and select_streams(arc, ("a", "iv", "b")).same_input(None)
