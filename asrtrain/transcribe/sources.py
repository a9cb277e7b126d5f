"""Where each input stream of a trained model came from, read off the training run's records.

``final.pt`` keeps the layout of its training archive: each stream's ``feats.scp`` (an
absolute path), its CMVN and its i-vector period. Beside each scp, the command that wrote
it left its resolved options (``prepare-features.config.yaml``, ``prepare-ivectors…``,
``prepare-fmllr…``, ``prepare-fmllr-feats…``): those say how to compute the stream again
from audio, with which extractor or fMLLR model. The aligner's own SAT features
(``ALI/fmllr/<split>/feats.scp``) are known by ``ALI/prepare-align.config.yaml``. A table
joined from others (a recipe's train with its speed-perturbed copies) names its parts in
``parts.txt`` beside it; they must all have been computed the same way.

A SAT stream needs more than its model: the GMM first pass that gave the recognised
speakers their transforms. That is found in the records of a held-out split's stream (the
dev archive's ``prepare fmllr-feats --transforms DECODE/trans.scp``, DECODE the SAT model's
``decode --first-pass FIRST``, FIRST the LDA+MLLT model's lattice decode) or given
(``export --first-pass DECODE``). A stream without such a record (features made outside
asrtrain) cannot be remade, and export says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from asrtrain.align.output import ALIGN_RECORD
from asrtrain.core.config import read_record
from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines
from asrtrain.transcribe.settings import STREAM_FILES, StreamSpec

#: The record each stream-writing command leaves in its output directory.
RECORDS = {"features": "prepare-features.config.yaml", "ivector": "prepare-ivectors.config.yaml",
           "fmllr": "prepare-fmllr.config.yaml", "sat": "prepare-fmllr-feats.config.yaml"}
#: Beside a joined table: the tables it joins, one scp a line.
JOINED_PARTS = "parts.txt"
#: ``decode``'s record, in its output directory.
DECODE_RECORD = "decode.config.yaml"
#: fMLLR estimation options carried to new recordings (prepare fmllr's names).
FMLLR_OPTIONS = ("lda_dim", "splice", "iters", "passes", "min_frames_full", "min_frames_diag")


def feature_options(record: dict[str, Any]) -> dict[str, Any]:
    """FeatureConfig fields from ``prepare features``' options (``feat_type`` is ``type``)."""
    from asrtrain.data.features import FeatureConfig

    known = {f.name for f in fields(FeatureConfig)}
    opts = {("type" if k == "feat_type" else k): v for k, v in record.items()}
    cfg = FeatureConfig(**{k: v for k, v in opts.items() if k in known})
    return cfg.to_dict()


def recorded_path(record: Path, rec: dict[str, Any], key: str) -> Path | None:
    """A path a command recorded as it was given: an absolute one as it is; a relative one
    from the directory the command ran in (the record's own place less its recorded
    relative ``out``: a recipe's ``exp/gmm/decode_sat_dev``), else from here."""
    value = rec.get(key)
    if value is None or value == "":
        return None
    path = Path(str(value))
    if path.is_absolute():
        return path
    out = rec.get("out")
    here = Path(os.path.abspath(record)).parent
    if out and not Path(str(out)).is_absolute():
        parts = Path(os.path.normpath(str(out))).parts
        if ".." not in parts and here.parts[-len(parts):] == parts:
            base = Path(*here.parts[:-len(parts)])
            if (base / path).exists():
                return base / path
    return path


def _features_of(data_dir: Any, where: Path) -> dict[str, Any]:
    """The feature options of the MFCC dir an i-vector or fMLLR stream was computed from."""
    record = Path(str(data_dir)) / RECORDS["features"]
    if not record.is_file():
        raise InputError(f"the features it was computed from ({data_dir}) have no "
                         f"{RECORDS['features']}", where)
    return feature_options(read_record(record))


@dataclass
class Source:
    """A stream's spec and the files its exported model directory copies (``OUT/<kind>/``
    name → where it is now); a SAT stream's spec is completed by :func:`sat_first_pass`."""

    spec: StreamSpec | None
    files: dict[str, Path]
    name: str = ""
    features: dict[str, Any] | None = None
    cmvn: str | None = None


def stream_source(entry: dict[str, Any]) -> Source:
    """The spec of one layout entry and the model files (extractor, fMLLR, SAT) it needs."""
    name, scp = str(entry["name"]), Path(str(entry.get("scp", "")))
    src = scp.parent
    cmvn = entry.get("cmvn")
    if (src / JOINED_PARTS).is_file():
        return _joined_source(entry, src / JOINED_PARTS)
    if (src / RECORDS["features"]).is_file():
        feats = feature_options(read_record(src / RECORDS["features"]))
        return Source(StreamSpec(name, "features", feats, cmvn=cmvn), {})
    if (src / RECORDS["ivector"]).is_file():
        rec = read_record(src / RECORDS["ivector"])
        model = Path(rec["extractor"]) if rec.get("extractor") else src / "extractor"
        return Source(StreamSpec(name, "ivector", _features_of(rec["data"], src), cmvn=cmvn,
                                 period=int(rec.get("period") or 10),
                                 online=bool(rec.get("online", True))), _files("ivector", model))
    if (src / RECORDS["fmllr"]).is_file():
        rec = read_record(src / RECORDS["fmllr"])
        model = Path(rec["model"]) if rec.get("model") else src
        options = {k: rec[k] for k in FMLLR_OPTIONS if k in rec}
        return Source(StreamSpec(name, "fmllr", _features_of(rec["data"], src), cmvn=cmvn,
                                 options=options), _files("fmllr", model))
    sat = sat_stream(scp)
    if sat is not None:
        model, mfcc = sat
        return Source(None, {"sat.pt": model}, name, _features_of(mfcc, src), cmvn)
    raise InputError(f"stream {name!r}: cannot tell how it was computed (no prepare features, "
                     "ivectors, fmllr or fmllr-feats record beside its scp, and not the "
                     "aligner's SAT features)", scp)


def _joined_source(entry: dict[str, Any], parts_file: Path) -> Source:
    """The source of a joined table: its parts', which must agree (train and its
    speed-perturbed copies are computed by the same commands and models)."""
    parts = [line.strip() for line in read_lines(parts_file) if line.strip()]
    if not parts:
        raise InputError("names no tables", parts_file)
    sources = [stream_source({**entry, "scp": part}) for part in parts]
    for part, other in zip(parts[1:], sources[1:], strict=True):
        if other != sources[0]:
            raise InputError(f"stream {entry['name']!r}: {part} was not computed as {parts[0]}",
                             parts_file)
    return sources[0]


def _files(kind: str, model_dir: Path) -> dict[str, Path]:
    return {name: model_dir / name for name in STREAM_FILES[kind]}


def sat_stream(scp: Path) -> tuple[Path, Path] | None:
    """(SAT model, MFCC dir) of SAT fMLLR features: ``prepare fmllr-feats``' output, or the
    aligner's ``ALI/fmllr/<split>/feats.scp``; None for any other scp."""
    src = scp.parent
    record = src / RECORDS["sat"]
    if record.is_file():
        rec = read_record(record)
        model, mfcc = recorded_path(record, rec, "model"), recorded_path(record, rec, "feats_dir")
        if model is None or mfcc is None:
            raise InputError("the prepare fmllr-feats record names no model or features", record)
        return model, mfcc
    ali = src.parent.parent
    record = ali / ALIGN_RECORD
    if src.parent.name != "fmllr" or not record.is_file():
        return None
    rec = read_record(record)
    dirs = {"train": rec.get("train")}
    for item in [*(rec.get("splits") or []), *(rec.get("extras") or [])]:
        key, _, value = str(item).partition("=")
        dirs[key] = value
    if not dirs.get(src.name):
        raise InputError(f"the aligner's record names no data dir of split {src.name!r}", record)
    mfcc = recorded_path(record, {**rec, "split": dirs[src.name]}, "split")
    assert mfcc is not None
    return ali / "models" / "sat.pt", mfcc


def held_out_first_pass(archive: Path, name: str) -> Path | None:
    """The SAT decode (``decode --first-pass``) whose transforms made stream ``name`` of a
    held-out ``archive``, from the records; None where they do not lead to one."""
    from asrtrain.data.shards import open_archive

    if not Path(archive).exists():
        return None
    try:
        layout = open_archive(archive).layout
    except (OSError, ValueError, KeyError, InputError):
        return None
    for entry in layout:
        if entry.get("name") != name:
            continue
        record = Path(str(entry.get("scp", ""))).parent / RECORDS["sat"]
        if not record.is_file():
            return None
        trans = recorded_path(record, read_record(record), "transforms")
        if trans is not None and (trans.parent / DECODE_RECORD).is_file():
            return trans.parent
    return None


def decode_record(decode_dir: Path) -> tuple[Path, dict[str, Any]]:
    record = Path(decode_dir) / DECODE_RECORD
    if not record.is_file():
        raise InputError(f"no {DECODE_RECORD}: not a decode dir of asrtrain", decode_dir)
    return record, read_record(record)


def sat_first_pass(source: Source, sat_decode: Path, lmwt: float | None = None) -> Source:
    """``source`` (a SAT stream) completed with the first pass of ``sat_decode``: the
    LDA+MLLT model, the graph it searched, its search settings, and the LM weight whose best
    paths gave the transforms (the SAT decode's, as it estimated them, unless ``lmwt``)."""
    import json

    record, rec = decode_record(sat_decode)
    first = recorded_path(record, rec, "first_pass")
    if first is None:
        raise InputError("not a SAT decode with --first-pass (its record names no first pass)",
                         sat_decode)
    sat_model = recorded_path(record, rec, "model")
    ours = source.files["sat.pt"]
    if sat_model is None or not sat_model.is_file() or not ours.is_file() \
            or not os.path.samefile(sat_model, ours):
        raise InputError(f"the SAT decode adapted {sat_model}, the network's features come "
                         f"from {ours}", sat_decode)
    stats = Path(sat_decode) / "decode_stats.json"
    recorded = json.loads(stats.read_text(encoding="utf-8")).get("first_pass_lmwt") \
        if stats.is_file() else None
    given = lmwt is not None
    if lmwt is None:
        lmwt = float(recorded or rec.get("first_pass_lmwt") or 1.0 / float(rec["acwt"]))
    first_record, first_rec = decode_record(first)
    if not first_rec.get("lattices"):
        raise InputError("the first pass was decoded without lattices", first)
    lda, graph = recorded_path(first_record, first_rec, "model"), \
        recorded_path(first_record, first_rec, "graph")
    if lda is None or graph is None:
        raise InputError("the first pass's record names no model or graph", first)
    options = {"acwt": float(first_rec["acwt"]), "beam": float(first_rec["beam"]),
               "max_active": int(first_rec["max_active"]),
               "lattice_beam": float(first_rec["lattice_beam"]), "lmwt": float(lmwt),
               "picked": f"first pass {first}, best paths at LM weight {lmwt:g} "
                         + ("(given)" if given else f"(as {sat_decode} estimated its transforms)")}
    check_first_pass_models(lda, ours, graph)
    files = {"lda.pt": lda, "sat.pt": ours}
    files.update({name: graph / name.removeprefix("graph/")
                  for name in STREAM_FILES["sat"] if name.startswith("graph/")})
    assert source.features is not None
    spec = StreamSpec(source.name, "sat", source.features, cmvn=source.cmvn, options=options)
    return Source(spec, files, source.name, source.features, source.cmvn)


def check_first_pass_models(lda: Path, sat: Path, graph: Path) -> tuple[Any, Any, Any]:
    """The LDA+MLLT and SAT rungs (read as tensors and plain data only) and the first pass's
    graph, refused in one line unless their pdfs are the same tree's and both rungs have the
    LDA+MLLT front end; returns (lda rung, sat rung, GraphInfo)."""
    from asrtrain.align.saved import load_rung
    from asrtrain.decode.graph_dir import GraphInfo
    from asrtrain.decode.job import check_gmm_graph

    paths = {"lda": lda, "sat": sat}
    rungs = {what: load_rung(path) for what, path in paths.items()}
    info = GraphInfo.load(graph)
    if info.kaldi:
        raise InputError("the first pass's graph is a Kaldi graph: prepare gmm-graph's are "
                         "exported", graph)
    for what, rung in rungs.items():
        if rung.front.lda is None:
            raise InputError(f"a {rung.name} model has no LDA+MLLT front end: the first pass "
                             f"needs the {what} rung", paths[what])
        check_gmm_graph(rung.tree, info, paths[what])
    return rungs["lda"], rungs["sat"], info
