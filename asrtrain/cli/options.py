"""Options and helpers every command shares: ``--config``, error handling, run context.

A command is written as::

    @click.command()
    @config_option
    @click.argument("out", type=click.Path(path_type=Path))
    def cmd(out: Path, **_): ...

and its body calls a library function inside ``with expected_errors():`` (the
root group already does that for every command).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


class Finite(click.ParamType):
    """A real number (``nan`` and ``inf`` are refused: Python's float() takes them), above a bound."""

    name = "number"

    def __init__(self, above: float | None = None) -> None:
        self.above = above

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if self.above is not None and number <= self.above:
            self.fail(f"{value!r} must be greater than {self.above:g}", param, ctx)
        return number


#: A finite number above zero (scales, beams, weights).
POSITIVE = Finite(above=0.0)


def _load_config(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """Eager callback: the config file becomes the defaults of every other option."""
    if value is None:
        return None
    from asrtrain.core.config import load_config
    from asrtrain.core.errors import AsrtrainError

    try:
        data = load_config(value)
    except AsrtrainError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="'--config'") from None
    known = {p.name for p in ctx.command.params}
    unknown = sorted(set(data) - known)
    if unknown:
        raise click.BadParameter(f"{value}: unknown option(s) {', '.join(unknown)} for "
                                 f"'{ctx.command_path}'", ctx=ctx, param_hint="'--config'")
    for param in ctx.command.params:   # one value for an option given many times: a list of one
        if getattr(param, "multiple", False) and isinstance(data.get(param.name or ""), str):
            data[param.name or ""] = [data[param.name or ""]]
    ctx.default_map = {**(ctx.default_map or {}), **data}
    return value


def config_option(func: F) -> F:
    """Add ``--config FILE`` (YAML or TOML) whose keys default the command's options."""
    return click.option(
        "--config", type=click.Path(exists=True, dir_okay=False), is_eager=True,
        expose_value=True, callback=_load_config,
        help="YAML or TOML file of option values; options given on the command line win.",
    )(func)


def adapt_jobs_options(func: F) -> F:
    """``--nj`` and ``--job-cmd`` of the adaptation commands (``prepare fmllr``, ``prepare ivectors``)."""
    func = click.option("--job-cmd", default=None, metavar="CMD",
                        help="Start each job with this command, on any host that sees DATA and OUT "
                        "under the same paths (srun --ntasks=1; env: this host), as Kaldi's queue.pl.")(func)
    return click.option("--nj", type=click.IntRange(min=1), default=1, show_default=True,
                        help="Jobs (local processes, or --job-cmd's; whole speakers each, balanced by "
                        "frames) for the passes over the corpus; the results do not depend on it.")(func)


def resolved_params(ctx: click.Context) -> dict[str, Any]:
    """The command's parameters as finally resolved (config file + command line + defaults)."""
    return {k: v for k, v in ctx.params.items() if k != "config"}


def default_of(config_class: type, name: str) -> Any:
    """The default of a config dataclass's field: an option's default lives in the dataclass."""
    from dataclasses import MISSING, fields

    for f in fields(config_class):
        if f.name == name:
            if f.default is MISSING:
                raise TypeError(f"{config_class.__name__}.{name} has no plain default")
            return f.default
    raise TypeError(f"{config_class.__name__} has no field {name!r}")
