"""An ensemble as one artifact: ``export --ensemble`` carries the other networks, and
``transcribe`` gives the words ``decode --ensemble`` gave at the exported setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from transcribe_helpers import GRID, SEARCH, run

from asrtrain.cli.main import cli
from asrtrain.decode.grid import setting_name


def _member(final: Path, out: Path, seed: int = 3) -> Path:
    """The fixture's network with its weights moved: another member on the same tree and input."""
    import torch

    from asrtrain.model.io import load_final, save_final

    base = load_final(final)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in base.model.parameters():
            p.add_(0.2 * p.abs().mean() * torch.randn(p.shape, generator=gen))
    return save_final(out, base.model, base.priors, base.layout, base.meta)


@pytest.fixture(scope="module")
def ensemble(trained_exp: Path, tmp_path_factory) -> tuple[Path, Path, Path]:
    """(member, the ensemble's decode dir, its export): dev and test decoded as one, dev scored."""
    work = tmp_path_factory.mktemp("ensemble")
    first = trained_exp / "exp/blstm/final.pt"
    member = _member(first, work / "member.pt")
    data = trained_exp / "data"
    for split in ("dev", "test"):
        run("decode", first, data / "lang/graph", data / "archives" / f"{split}.h5",
            work / f"decode_{split}", "--nj", "1", "--lattices", *GRID, *SEARCH,
            "--ensemble", member)
    (work / "decode_dev" / "ref.txt").write_text(
        (trained_exp / "exp/blstm/decode_dev/ref.txt").read_text())
    run("score", "--sweep", work / "decode_dev")
    model = work / "model"
    run("export", trained_exp / "exp/blstm", model, "--ensemble", member, "--pick-on",
        work / "decode_dev")
    return member, work, model


def test_the_ensemble_export_carries_its_networks(ensemble):
    member, _, model = ensemble
    settings = json.loads((model / "settings.json").read_text())
    manifest = json.loads((model / "manifest.json").read_text())
    assert settings["members"] == ["members/2.pt"] and "members/2.pt" in manifest["files"]
    assert manifest["format_version"] == 2   # a reader of version 1 refuses it, not decodes half of it
    assert (model / "members/2.pt").read_bytes() == member.read_bytes()
    from asrtrain import Transcriber

    assert [n.final.config.num_pdfs for n in Transcriber(model, device="cpu").networks] == \
        [json.loads((model / "graph/info.json").read_text())["num_pdfs"]] * 2


def test_transcribe_gives_the_ensembles_decode(ensemble, tiny_corpus: Path, tmp_path: Path):
    _, work, model = ensemble
    d = json.loads((model / "settings.json").read_text())["decode"]
    name = setting_name(d["lmwt"], d["wip"], [d["wip"], 1.0])
    out = tmp_path / "out"
    run("transcribe", model, tiny_corpus / "test", "--out", out)
    rows = lambda p: dict((ln.split()[0], ln.split()[1:]) for ln in p.read_text().splitlines()  # noqa: E731
                          if ln.strip())
    ours, theirs = rows(out / "text"), rows(work / "decode_test" / "hyp" / f"{name}.txt")
    assert ours == theirs and sum(len(w) for w in theirs.values()) > 10


def test_a_member_of_another_input_is_refused(trained_exp: Path, tmp_path: Path):
    from asrtrain.model.io import load_final, save_final

    base = load_final(trained_exp / "exp/blstm/final.pt")
    layout = [{**e, "scp": "/elsewhere/feats.scp"} for e in base.layout]
    other = save_final(tmp_path / "other.pt", base.model, base.priors, layout, base.meta)
    res = CliRunner().invoke(cli, ["export", str(trained_exp / "exp/blstm"), str(tmp_path / "m"),
                                   "--ensemble", str(other)])
    assert res.exit_code != 0 and "share their input" in res.output
    assert not (tmp_path / "m").exists()


def test_a_bundle_whose_member_is_missing_is_refused(ensemble, tmp_path: Path):
    import shutil

    from asrtrain.core.errors import InputError
    from asrtrain.transcribe.bundle import ModelBundle

    _, _, model = ensemble
    copy = tmp_path / "model"
    shutil.copytree(model, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["files"]["members/2.pt"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="manifest lists no members/2.pt"):
        ModelBundle.open(copy)


def test_one_network_stays_format_1_and_a_newer_format_is_refused(exported: Path, tmp_path: Path):
    import shutil

    from asrtrain.core.errors import InputError
    from asrtrain.transcribe.bundle import ModelBundle
    from asrtrain.transcribe.manifest import FORMAT_VERSION

    assert json.loads((exported / "manifest.json").read_text())["format_version"] == 1
    copy = tmp_path / "model"
    shutil.copytree(exported, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "format_version": FORMAT_VERSION + 1}))
    with pytest.raises(InputError, match=f"reads versions 1 to {FORMAT_VERSION}"):
        ModelBundle.open(copy)
