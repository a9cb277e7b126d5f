"""The feature streams a model reads, chosen by name out of an archive's fused input.

An archive holds its streams side by side (its header's ``layout``: each stream's name,
offset and width, e.g. fmllr 40 + ivector 100 + logmel 120). ``asrtrain train --streams``
feeds the model some of them, so one archive serves an input ablation (logmel alone,
+fmllr, +ivector, all) without writing an archive per combination. The choice travels
with the model (checkpoints, ``final.pt``) by name: a held-out or decoding archive gives
the same streams from wherever its own header places them.

Without ``--streams`` the model reads the archive's whole input, as before: other
archives are then taken whole too, checked by width only.

Torch- and numpy-free at import: the training config validates ``--streams`` with
:func:`parse_streams`, and the command line must start fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from asrtrain.core.errors import ConfigError, InputError

if TYPE_CHECKING:
    from asrtrain.data.archive import Archive


def parse_streams(text: str | None) -> tuple[str, ...] | None:
    """``"fmllr,logmel"`` → ``("fmllr", "logmel")``; ``None`` or empty: every stream."""
    if text is None or not text.strip():
        return None
    names = tuple(part.strip() for part in text.split(","))
    if any(not name for name in names):
        raise ConfigError(f"--streams {text!r}: an empty stream name (a comma list of names, e.g. fmllr,logmel)")
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ConfigError(f"--streams {text!r} names {', '.join(twice)} more than once")
    return names


def stream_names(archive: Archive) -> list[str]:
    """The archive's streams, in its column order."""
    return [str(entry["name"]) for entry in archive.layout]


@dataclass(frozen=True)
class InputSelection:
    """The columns a model reads from one archive: whole streams, in that archive's order.

    ``by_name``: chosen with ``--streams``, so other archives are read by these names;
    else the whole input, which other archives give whole.
    """

    streams: tuple[str, ...]
    columns: tuple[int, ...]
    source_dim: int          # columns of the archive they were picked from
    by_name: bool = False

    @property
    def dim(self) -> int:
        """The model's input width."""
        return len(self.columns)

    @property
    def index(self) -> list[int] | None:
        """The columns to take from a feature array, or ``None`` when it is all of them in order
        (no copy to make)."""
        if self.columns == tuple(range(self.source_dim)):
            return None
        return list(self.columns)

    def take(self, feats: Any) -> Any:
        """``feats[..., columns]`` of an array of the source archive's width (itself when whole)."""
        index = self.index
        return feats if index is None else feats[..., index]

    def on(self, archive: Archive, role: str = "decoding") -> InputSelection:
        """The same input from another archive: these streams by name, or its whole input."""
        if not self.by_name:
            return whole_input(archive)
        have = stream_names(archive)
        missing = [name for name in self.streams if name not in have]
        if missing:
            raise InputError(f"the model reads stream {missing[0]!r}, which this {role} archive does not have "
                             f"(its streams: {', '.join(have) or 'none'})", archive.path)
        picked = _columns(archive, self.streams)  # in the model's order, wherever this archive has them
        return InputSelection(self.streams, picked, archive.feat_dim, by_name=True)

    def describe(self) -> str:
        """One line: which streams, how many of the archive's columns."""
        what = "+".join(self.streams) if self.by_name else "the whole input"
        return f"{what} ({self.dim} of {self.source_dim} columns)"

    def to_dict(self) -> dict[str, Any]:
        """Plain values for checkpoints and ``final.pt``."""
        return {"streams": list(self.streams), "columns": list(self.columns),
                "source_dim": self.source_dim, "by_name": self.by_name}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InputSelection:
        return cls(tuple(str(s) for s in data["streams"]), tuple(int(c) for c in data["columns"]),
                   int(data["source_dim"]), bool(data.get("by_name", False)))

    def same_input(self, saved: dict[str, Any] | None) -> bool:
        """Whether a checkpoint's record (``None``: written before records, the whole input) is
        this selection: the same columns of the same streams."""
        if saved is None:
            return self.index is None
        return (list(self.streams), list(self.columns)) == (list(saved["streams"]), list(saved["columns"]))


def whole_input(archive: Archive) -> InputSelection:
    """Every column of ``archive``."""
    return InputSelection(tuple(stream_names(archive)), tuple(range(archive.feat_dim)), archive.feat_dim)


def select_streams(archive: Archive, names: Sequence[str] | None) -> InputSelection:
    """The streams ``names`` of the training archive (``None``: its whole input); an unknown name is
    one error listing the archive's streams."""
    if names is None:
        return whole_input(archive)
    have = stream_names(archive)
    unknown = [name for name in names if name not in have]
    if unknown:
        raise ConfigError(f"--streams: no stream {unknown[0]!r} in this archive (its streams: "
                          f"{', '.join(have) or 'none'})", archive.path)
    ordered = tuple(name for name in have if name in names)  # the archive's order, whatever the list's
    return InputSelection(ordered, _columns(archive, ordered), archive.feat_dim, by_name=True)


def _columns(archive: Archive, names: Sequence[str]) -> tuple[int, ...]:
    """The archive's columns of the streams ``names`` (all present), stream after stream in that order."""
    where = {str(entry["name"]): (int(entry["offset"]), int(entry["dim"])) for entry in archive.layout}
    return tuple(c for name in names for c in range(where[name][0], where[name][0] + where[name][1]))


def model_input(meta: dict[str, Any], archive: Archive) -> InputSelection:
    """The columns of ``archive`` a trained model reads: the streams its metadata records
    (``final.pt``'s ``input``), by name from this archive's header; a model without the record
    (trained before it existed) reads the whole input."""
    saved = meta.get("input")
    return whole_input(archive) if not saved else InputSelection.from_dict(saved).on(archive, "decoding")
