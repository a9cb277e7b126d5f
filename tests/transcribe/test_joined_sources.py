"""A table joined from others (a recipe's train with its speed-perturbed copies, ``parts.txt``
beside it): export reads how its stream was computed from its parts, which must agree."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from asrtrain.cli.main import cli
from asrtrain.core.errors import InputError
from asrtrain.transcribe.sources import JOINED_PARTS, stream_source


def _joined(where: Path, parts: list[Path]) -> dict:
    where.mkdir(parents=True)
    (where / "table.scp").write_text("".join((p / "feats.scp").read_text() for p in parts))
    (where / JOINED_PARTS).write_text("".join(f"{p / 'feats.scp'}\n" for p in parts))
    return {"name": "mfcc", "scp": str(where / "table.scp"), "cmvn": "means"}


def test_the_parts_source_when_they_agree(tiny_mfcc: Path, tmp_path: Path) -> None:
    entry = _joined(tmp_path / "joined", [tiny_mfcc / "train", tiny_mfcc / "dev"])
    alone = stream_source({**entry, "scp": str(tiny_mfcc / "train" / "feats.scp")})
    assert stream_source(entry) == alone and alone.spec is not None
    assert alone.spec.kind == "features"


def test_parts_computed_differently_are_named(tiny_corpus: Path, tiny_mfcc: Path, tmp_path: Path) -> None:
    other = tmp_path / "logmel"
    res = CliRunner().invoke(cli, ["prepare", "features", str(tiny_corpus / "dev"), str(other),
                                   "--type", "logmel", "--nj", "1"])
    assert res.exit_code == 0, res.output
    entry = _joined(tmp_path / "joined", [tiny_mfcc / "train", other])
    with pytest.raises(InputError, match=f"{other / 'feats.scp'} was not computed as"):
        stream_source(entry)
    (tmp_path / "joined" / JOINED_PARTS).write_text("\n")
    with pytest.raises(InputError, match="names no tables"):
        stream_source(entry)
