"""A Click group whose subcommands are imported only when used.

Each subcommand is named by ``"module:attribute"``. Listing a group imports the
thin command modules (click only) but none of the library behind them. An entry
whose module is not installed is left out of the listing rather than breaking
``--help`` for every other command.
"""

from __future__ import annotations

import importlib
import importlib.util

import click


class LazyGroup(click.Group):
    """A group with ``lazy_subcommands = {name: "pkg.module:attr"}``."""

    def __init__(self, *args: object, lazy_subcommands: dict[str, str] | None = None,
                 **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.lazy_subcommands = dict(lazy_subcommands or {})

    def _available(self) -> list[str]:
        names = []
        for name, target in self.lazy_subcommands.items():
            module = target.split(":", 1)[0]
            if importlib.util.find_spec(module) is not None:
                names.append(name)
        return names

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._available()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_subcommands and cmd_name in self._available():
            module_name, attr = self.lazy_subcommands[cmd_name].split(":", 1)
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):
                raise TypeError(f"{module_name}:{attr} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)
