"""What an exported model records besides its files: the front end and the decoding setting.

Plain JSON (``settings.json``), so loading a model never runs code from it. Each frame
stream of the network's input says how to make it again from audio: a feature type with
the options ``prepare features`` was given, CMVN per speaker (means or variances), or an
i-vector / fMLLR stream computed from MFCCs by the exported extractor or model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from asrtrain.core.errors import InputError
from asrtrain.decode.grid import (
    DEFAULT_ACWT,
    DEFAULT_BEAM,
    DEFAULT_LATTICE_BEAM,
    DEFAULT_MAX_ACTIVE,
)

#: The kinds of stream an exported model can make again from audio: features (logmel,
#: MFCC…), online i-vectors, global fMLLR (``prepare fmllr``), and SAT fMLLR (the aligner's
#: SAT model, each speaker's transform from a GMM first pass, ``first_pass.py``).
STREAM_KINDS = ("features", "ivector", "fmllr", "sat")
#: The model files each stream kind needs, relative to ``OUT/<kind>/``.
STREAM_FILES = {"ivector": ("ubm.npz", "extractor.npz"), "fmllr": ("lda.mat", "gmm/gmm.npz"),
                "sat": ("lda.pt", "sat.pt", "graph/HCLG.fst", "graph/words.txt",
                        "graph/phones.txt", "graph/tree", "graph/info.json",
                        "graph/align_lexicon.txt")}
#: What a SAT stream's first pass records (its ``options``): the LDA+MLLT GMM's lattice
#: search, and the LM weight of the best paths the transforms are estimated from.
FIRST_PASS_KEYS = ("acwt", "beam", "max_active", "lattice_beam", "lmwt")
#: Kaldi's decode.sh search settings, used when the dev decode recorded none.
DEFAULT_SEARCH = {"acwt": DEFAULT_ACWT, "beam": DEFAULT_BEAM, "max_active": DEFAULT_MAX_ACTIVE,
                  "lattice_beam": DEFAULT_LATTICE_BEAM}


@dataclass
class StreamSpec:
    """One input stream: how to compute it, and its place in the model's input."""

    name: str
    kind: str                            # features | ivector | fmllr | sat
    features: dict[str, Any]             # FeatureConfig fields of the stream (or of its MFCCs)
    cmvn: str | None = None              # None, "means" or "vars" (per speaker)
    period: int | None = None            # online i-vectors: one row per period frames
    online: bool = True                  # i-vectors: online (rows) or one per utterance
    options: dict[str, Any] = field(default_factory=dict)  # fMLLR: lda_dim, splice, iters…;
    #                                     SAT: the first pass (FIRST_PASS_KEYS, and "picked")

    def __post_init__(self) -> None:
        if self.kind not in STREAM_KINDS:
            raise InputError(f"stream {self.name!r}: unknown kind {self.kind!r}")
        if self.kind == "sat":
            missing = [k for k in FIRST_PASS_KEYS if k not in self.options]
            if missing:
                raise InputError(f"stream {self.name!r}: the SAT first pass has no "
                                 f"{', '.join(missing)}")


@dataclass
class DecodeSetting:
    """The search and the (LM weight, penalty) picked on dev."""

    lmwt: float
    wip: float = 0.0
    acwt: float = DEFAULT_SEARCH["acwt"]
    beam: float = DEFAULT_SEARCH["beam"]
    max_active: int = int(DEFAULT_SEARCH["max_active"])
    lattice_beam: float = DEFAULT_SEARCH["lattice_beam"]
    picked: str = ""                     # where the setting comes from (a best_wer line)


@dataclass
class ModelSettings:
    """Everything but the files: sample rate, streams in input order, chunk, decoding."""

    sample_rate: int
    chunk: int
    tolerance: int
    streams: list[StreamSpec]
    decode: DecodeSetting
    tree_id: str | None = None
    members: list[str] = field(default_factory=list)  # more networks (members/<k>.pt), scores averaged

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelSettings:
        """Settings from ``settings.json``; a missing or odd field is one InputError."""
        try:
            return cls(sample_rate=int(data["sample_rate"]), chunk=int(data["chunk"]),
                       tolerance=int(data["tolerance"]),
                       streams=[StreamSpec(**s) for s in data["streams"]],
                       decode=DecodeSetting(**data["decode"]), tree_id=data.get("tree_id"),
                       members=[str(m) for m in data.get("members", [])])
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"settings.json is not an asrtrain model's ({type(exc).__name__}: "
                             f"{exc})") from None
