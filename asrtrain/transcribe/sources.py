"""Where each input stream of a trained model came from, read off the training run's records.

``final.pt`` keeps the layout of its training archive: each stream's ``feats.scp`` (an
absolute path), its CMVN and its i-vector period. Beside each scp, the command that wrote
it left its resolved options (``prepare-features.config.yaml``, ``prepare-ivectors…``,
``prepare-fmllr…``): those say how to compute the stream again from audio, with which
extractor or fMLLR model. A stream without such a record (SAT fMLLR from the aligner, or
features made outside asrtrain) cannot be remade, and export says so.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.transcribe.settings import StreamSpec

#: The record each stream-writing command leaves in its output directory.
RECORDS = {"features": "prepare-features.config.yaml", "ivector": "prepare-ivectors.config.yaml",
           "fmllr": "prepare-fmllr.config.yaml"}
#: fMLLR estimation options carried to new recordings (prepare fmllr's names).
FMLLR_OPTIONS = ("lda_dim", "splice", "iters", "passes", "min_frames_full", "min_frames_diag")


def read_record(path: Path) -> dict[str, Any]:
    """A command's resolved options (YAML, safe loader: plain values only)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the command record ({type(exc).__name__})", path) from None
    if not isinstance(data, dict):
        raise InputError("not a command record", path)
    return data


def feature_options(record: dict[str, Any]) -> dict[str, Any]:
    """FeatureConfig fields from ``prepare features``' options (``feat_type`` is ``type``)."""
    from asrtrain.data.features import FeatureConfig

    known = {f.name for f in fields(FeatureConfig)}
    opts = {("type" if k == "feat_type" else k): v for k, v in record.items()}
    cfg = FeatureConfig(**{k: v for k, v in opts.items() if k in known})
    return cfg.to_dict()


def _features_of(data_dir: Any, where: Path) -> dict[str, Any]:
    """The feature options of the MFCC dir an i-vector or fMLLR stream was computed from."""
    record = Path(str(data_dir)) / RECORDS["features"]
    if not record.is_file():
        raise InputError(f"the features it was computed from ({data_dir}) have no "
                         f"{RECORDS['features']}", where)
    return feature_options(read_record(record))


def stream_source(entry: dict[str, Any]) -> tuple[StreamSpec, Path | None]:
    """The spec of one layout entry and the directory of its model (extractor, fMLLR), if any."""
    name, scp = str(entry["name"]), Path(str(entry.get("scp", "")))
    src = scp.parent
    cmvn = entry.get("cmvn")
    if (src / RECORDS["features"]).is_file():
        feats = feature_options(read_record(src / RECORDS["features"]))
        return StreamSpec(name, "features", feats, cmvn=cmvn), None
    if (src / RECORDS["ivector"]).is_file():
        rec = read_record(src / RECORDS["ivector"])
        model = Path(rec["extractor"]) if rec.get("extractor") else src / "extractor"
        return StreamSpec(name, "ivector", _features_of(rec["data"], src), cmvn=cmvn,
                          period=int(rec.get("period") or 10), online=bool(rec.get("online", True))
                          ), model
    if (src / RECORDS["fmllr"]).is_file():
        rec = read_record(src / RECORDS["fmllr"])
        model = Path(rec["model"]) if rec.get("model") else src
        options = {k: rec[k] for k in FMLLR_OPTIONS if k in rec}
        return StreamSpec(name, "fmllr", _features_of(rec["data"], src), cmvn=cmvn,
                          options=options), model
    raise InputError(f"stream {name!r}: cannot tell how it was computed (no prepare features, "
                     "ivectors or fmllr record beside its scp; SAT fMLLR from the aligner needs the "
                     "GMM first pass, which export does not carry yet)", scp)
