"""Configuration files (YAML or TOML) for any command, overridden by the command line.

A config file's keys are the command's option names (``--batch-size`` or
``batch_size``). They become Click's ``default_map``, so an option given on the
command line always wins, and ``show_default`` help stays truthful.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

import tomllib
import yaml

from asrtrain.core.atomic import write_text
from asrtrain.core.errors import ConfigError
from asrtrain.core.textio import read_text

T = TypeVar("T")


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML (``.yaml``/``.yml``) or TOML (``.toml``) file into a flat option mapping."""
    p = Path(path)
    try:
        text = read_text(p)
    except OSError as exc:
        raise ConfigError(exc.strerror or "cannot read", p) from None
    try:
        if p.suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"not valid {'TOML' if p.suffix == '.toml' else 'YAML'}: {first}", p) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("the top level must be a mapping of option names to values", p)
    return {normalize_key(k): v for k, v in data.items()}


def normalize_key(key: str) -> str:
    """``--batch-size``, ``batch-size`` and ``batch_size`` all name the parameter ``batch_size``."""
    return str(key).lstrip("-").replace("-", "_")


def to_plain(value: Any) -> Any:
    """Make a resolved parameter YAML-friendly (paths to strings, tuples to lists)."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    return value


def write_config(path: str | os.PathLike[str], params: dict[str, Any]) -> None:
    """Write the resolved configuration of a run, loadable again with ``--config``."""
    plain = {k: to_plain(v) for k, v in params.items() if k != "config"}
    write_text(path, yaml.safe_dump(plain, sort_keys=True, default_flow_style=False))


def read_record(path: Path) -> dict[str, Any]:
    """A command's resolved options as :func:`write_config` wrote them (YAML, safe loader:
    plain values only): what a later command reads of an earlier one's run."""
    from asrtrain.core.errors import InputError

    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the command record ({type(exc).__name__})", path) from None
    if not isinstance(data, dict):
        raise InputError("not a command record", path)
    return data


def strict_from_dict(cls: type[T], data: dict[str, Any], what: str) -> T:
    """``cls(**data)`` for a dataclass, where an unknown key is an error naming it.

    ``what`` says what the keys are ("training option"), for the message.
    """
    from dataclasses import fields

    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"unknown {what}(s): {', '.join(unknown)}")
    return cls(**data)
