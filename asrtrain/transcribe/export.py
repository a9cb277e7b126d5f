"""``asrtrain export``: a trained model and all it needs, as one versioned directory.

Layout of OUT::

    manifest.json     format, versions, sha256 and size of every file below
    settings.json     sample rate, input streams (features, CMVN, i-vector, fMLLR), chunk,
                      the search and the LM weight and penalty picked on dev, tree id
    final.pt          the network (weights-only torch file)
    members/<k>.pt    the ensemble's other networks, k = 2, 3, ... (``--ensemble``; transcribe
                      averages their scores with final.pt's, as ``decode --ensemble`` does)
    graph/            HCLG.fst, words.txt, phones.txt, tree, info.json, align_lexicon.txt
    ivector/          ubm.npz, extractor.npz      (when the network reads i-vectors)
    fmllr/            lda.mat, gmm/gmm.npz        (when it reads global fMLLR features)
    sat/              lda.pt, sat.pt, graph/      (when it reads SAT fMLLR features: the
                      LDA+MLLT and SAT GMMs, the graph of their first pass, as graph/ above)

Nothing is found by a recipe's conventions alone: the streams come from the records the
training run left (``sources.py``), the graph from the model's alignments (``lang/graph``
beside ``lang/pdf_ali``) unless ``--graph`` says otherwise, the setting from the dev
decode's ``best_wer`` unless ``--lmwt`` says otherwise, a SAT stream's first pass from
the held-out archives' records (the pick's, then the training run's ``--valid``) unless
``--first-pass`` names the SAT decode.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Any

from asrtrain.core.errors import ConfigError, InputError
from asrtrain.transcribe import manifest
from asrtrain.transcribe.settings import DEFAULT_SEARCH, STREAM_FILES, DecodeSetting, ModelSettings

log = logging.getLogger("asrtrain.export")

#: The graph files decoding reads (``decode/graph_dir.py``).
GRAPH_FILES = ("HCLG.fst", "words.txt", "phones.txt", "tree", "info.json", "align_lexicon.txt")
#: Where a training run (``asrtrain train``) or a recipe's exp dir keeps the network.
MODEL_NAMES = ("final.pt", "blstm/final.pt")


def find_model(exp: Path) -> Path:
    """``final.pt`` of EXP: the file itself, EXP/final.pt, or a recipe's EXP/blstm/final.pt."""
    if exp.is_file():
        return exp
    for name in MODEL_NAMES:
        if (exp / name).is_file():
            return exp / name
    raise InputError(f"no trained model here (looked for {', '.join(MODEL_NAMES)})", exp)


def default_graph(meta: dict[str, Any]) -> Path | None:
    """``lang/graph`` of the lang dir whose alignments the model was trained on."""
    options = (meta.get("archive_header") or {}).get("options") or {}
    ali = options.get("ali") if isinstance(options, dict) else None
    if not ali:
        return None
    graph = Path(str(ali)).parent.parent / "graph"
    return graph if graph.is_dir() else None


def picked_setting(decode_dir: Path) -> DecodeSetting:
    """The setting of a scored dev decode (its ``best_wer``) and the search it ran with."""
    from asrtrain.core.config import read_record
    from asrtrain.core.textio import read_text
    from asrtrain.decode.grid import parse_setting
    from asrtrain.transcribe.sources import DECODE_RECORD

    best = decode_dir / "best_wer"
    if not best.is_file():
        raise InputError("no best_wer: score the dev decode first (asrtrain score --sweep), or "
                         "give --lmwt", decode_dir)
    line = read_text(best).strip()
    name = Path(line.split()[-1]).name.removeprefix("wer_") if line else ""
    setting = parse_setting(name)
    if setting is None:
        raise InputError(f"cannot read the setting from {line!r}", best)
    search = dict(DEFAULT_SEARCH)
    record = decode_dir / DECODE_RECORD
    if record.is_file():
        rec = read_record(record)
        if not rec.get("lattices", False):
            log.warning("%s was decoded without lattices: transcribe searches with lattices "
                        "(for word confidences); its words may differ where the one-best "
                        "search was pruned differently", decode_dir)
        search.update({k: rec[k] for k in search if rec.get(k) is not None})
    return DecodeSetting(lmwt=setting[0], wip=setting[1], acwt=float(search["acwt"]),
                         beam=float(search["beam"]), max_active=int(search["max_active"]),
                         lattice_beam=float(search["lattice_beam"]), picked=line)


def model_streams(final: Any) -> list[dict[str, Any]]:
    """The training layout's entries of the streams the network reads, in layout order."""
    chosen = (final.meta.get("input") or {})
    if chosen.get("by_name"):
        names = set(chosen["streams"])
        return [e for e in final.layout if e["name"] in names]
    return list(final.layout)


def _copy(src: Path, dest: Path) -> None:
    if not src.is_file():
        raise InputError("missing (needed by the exported model)", src)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest)


def export_model(exp: Path, out: Path, graph: Path | None = None, pick_on: Path | None = None,
                 lmwt: float | None = None, wip: float | None = None,
                 search: dict[str, Any] | None = None, first_pass: Path | None = None,
                 first_pass_lmwt: float | None = None, ensemble: list[Path] | None = None
                 ) -> dict[str, Any]:
    """Write the model directory OUT from the training run EXP; returns the manifest.
    ``ensemble``: more networks (final.pt files or training dirs) decoded with EXP's as one.
    ``search`` overrides the dev decode's search settings (``DEFAULT_SEARCH``'s keys);
    ``first_pass`` names the SAT decode of a SAT stream's first pass (found from the records
    when None), ``first_pass_lmwt`` the LM weight of its best paths."""
    from asrtrain.core.atomic import atomic_path
    from asrtrain.decode.graph_dir import GraphInfo
    from asrtrain.model.io import load_final
    from asrtrain.transcribe.sources import stream_source

    exp, out = Path(exp), Path(out)
    model_path = find_model(exp)
    final = load_final(model_path)
    graph = graph or default_graph(final.meta)
    if graph is None:
        raise ConfigError("cannot tell which graph the model decodes with: give --graph DIR")
    info = GraphInfo.load(graph)
    if info.kaldi:
        raise InputError("a Kaldi graph (transition-id labels): export takes asrtrain's "
                         "prepare lang graphs", graph)
    _check_tree(final, info, "the model", graph)
    members = [_member(find_model(Path(m)), final, info) for m in ensemble or []]
    setting = _setting(model_path, pick_on, lmwt, wip)
    for key, value in (search or {}).items():
        if key not in DEFAULT_SEARCH:
            raise ConfigError(f"unknown search setting {key!r}")
        if value is not None:
            setattr(setting, key, type(DEFAULT_SEARCH[key])(value))
    sources = [stream_source(entry) for entry in model_streams(final)]
    if (first_pass is not None or first_pass_lmwt is not None) \
            and all(s.spec is not None for s in sources):
        raise ConfigError("--first-pass and --first-pass-lmwt are for a network reading SAT "
                          "fMLLR features; this one reads "
                          + "+".join(s.spec.kind for s in sources if s.spec is not None))
    sources = [_with_first_pass(s, model_path, final.meta, pick_on, first_pass, first_pass_lmwt)
               if s.spec is None else s for s in sources]
    specs = [s.spec for s in sources if s.spec is not None]
    rates = {int(s.features["sample_rate"]) for s in specs}
    if len(rates) != 1:
        raise InputError(f"the streams were computed at different sample rates {sorted(rates)}",
                         model_path)
    header = final.meta.get("archive_header") or {}
    settings = ModelSettings(sample_rate=rates.pop(), chunk=int(header.get("chunk", 21)),
                             tolerance=int(header.get("length_tolerance", 2)), streams=specs,
                             decode=setting, tree_id=info.tree_id,
                             members=[f"members/{k}.pt" for k in range(2, len(members) + 2)])
    with atomic_path(out) as tmp:
        tmp.mkdir(parents=True)
        files = _write_files(tmp, model_path, graph, sources, settings)
        for name, member in zip(settings.members, members, strict=True):
            _copy(member, tmp / name)
            files.append(name)
        data = manifest.build(tmp, files, {"source": {"model": str(model_path.resolve()),
                                                      "graph": str(Path(graph).resolve())}},
                              ensemble=bool(settings.members))
        (tmp / manifest.MANIFEST).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    log.info("exported %s (%d files, streams %s, LM weight %g, penalty %g) to %s", model_path,
             len(files), "+".join(s.name for s in specs), setting.lmwt, setting.wip, out)
    return data


def _member(path: Path, first: Any, info: Any) -> Path:
    """``path``, checked to be a network the ensemble can average with ``first``: the graph's
    tree and pdfs, and the same input streams from the same chunks (its context may differ)."""
    from asrtrain.model.io import load_final

    member = load_final(path)
    _check_tree(member, info, "this ensemble member", path)
    if member.config.num_pdfs != first.config.num_pdfs:
        raise InputError(f"the member has {member.config.num_pdfs} outputs, the exported network "
                         f"{first.config.num_pdfs}", path)
    ours, theirs = _inputs(member), _inputs(first)
    chunks = {int((f.meta.get("archive_header") or {}).get("chunk", 21)) for f in (member, first)}
    if ours != theirs or member.config.input_dim != first.config.input_dim or len(chunks) > 1:
        raise InputError(f"the member reads {ours} ({member.config.input_dim} dims), the exported "
                         f"network {theirs} ({first.config.input_dim}): an ensemble's networks "
                         "share their input", path)
    return path


def _check_tree(final: Any, info: Any, what: str, where: Path) -> None:
    """Refuse a network whose recorded tree is not the graph's."""
    from asrtrain.decode.loglikes import model_tree_id

    tree = model_tree_id(final.meta)
    if tree is not None and tree != info.tree_id:
        raise InputError(f"the graph was built for tree {info.tree_id}, {what} for {tree}", where)


def _inputs(final: Any) -> list[tuple[Any, ...]]:
    """What a network reads, stream by stream: name, dims, CMVN and the features it was made from."""
    return [(e["name"], e.get("dim"), e.get("cmvn"), e.get("scp")) for e in model_streams(final)]


def _with_first_pass(source: Any, model_path: Path, meta: dict[str, Any],
                     pick_on: Path | None, first_pass: Path | None,
                     lmwt: float | None) -> Any:
    """A SAT stream completed with its first pass: ``first_pass`` (the SAT decode), else
    the one the records of a held-out archive lead to (the pick's decode, then ``--valid``)."""
    from asrtrain.transcribe.sources import (
        DECODE_RECORD,
        decode_record,
        held_out_first_pass,
        recorded_path,
        sat_first_pass,
    )

    if first_pass is None:
        archives = []
        pick = pick_on or model_path.parent / "decode_dev"
        if (pick / DECODE_RECORD).is_file():
            record, rec = decode_record(pick)
            archives.append(recorded_path(record, rec, "data"))
        valid = (meta.get("train_config") or {}).get("valid")
        if valid:
            archives.append(Path(str(valid)))
        for archive in archives:
            first_pass = held_out_first_pass(archive, source.name) if archive else None
            if first_pass is not None:
                break
    if first_pass is None:
        raise InputError(f"stream {source.name!r} is SAT fMLLR ({source.files['sat.pt']}): no "
                         "record leads to the GMM first pass its held-out speakers were adapted "
                         "with; give --first-pass DIR (the SAT model's decode --first-pass, e.g. "
                         "exp/gmm/decode_sat_dev)", model_path)
    sat = sat_first_pass(source, first_pass, lmwt)
    assert sat.spec is not None
    log.info("stream %s: SAT fMLLR, %s", source.name, sat.spec.options["picked"])
    return sat


def _setting(model_path: Path, pick_on: Path | None, lmwt: float | None, wip: float | None
             ) -> DecodeSetting:
    """--lmwt/--wip as given, else the dev decode's pick (EXP's decode_dev by default)."""
    default_dir = model_path.parent / "decode_dev"
    if pick_on is None and lmwt is None and not default_dir.is_dir():
        raise ConfigError(f"no dev decode at {default_dir}: give --pick-on DIR or --lmwt")
    if pick_on is not None or lmwt is None:
        setting = picked_setting(pick_on or default_dir)
    else:
        setting = DecodeSetting(lmwt=lmwt, picked="given (--lmwt)")
    if lmwt is not None:
        setting.lmwt = lmwt
    if wip is not None:
        setting.wip = wip
    return setting


def _write_files(root: Path, model_path: Path, graph: Path, sources: list[Any],
                 settings: ModelSettings) -> list[str]:
    """Copy the files into ``root``; their relative names."""
    files = ["final.pt", "settings.json"]
    _copy(model_path, root / "final.pt")
    for name in GRAPH_FILES:
        _copy(Path(graph) / name, root / "graph" / name)
        files.append(f"graph/{name}")
    for source in sources:
        kind = source.spec.kind
        if kind in STREAM_FILES:
            if (root / kind).exists():
                raise InputError(f"two {kind} streams: export carries one", model_path)
            for name in STREAM_FILES[kind]:
                _copy(source.files[name], root / kind / name)
                files.append(f"{kind}/{name}")
    (root / "settings.json").write_text(json.dumps(settings.to_dict(), indent=2) + "\n",
                                        encoding="utf-8")
    return files
