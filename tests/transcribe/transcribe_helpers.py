"""What the transcribe tests and their fixture share, in a module of its own name: ``from
conftest import`` finds whichever ``conftest`` a partial run imported first (tests/decode's)."""

from __future__ import annotations

from click.testing import CliRunner

from asrtrain.cli.main import cli

#: The search of the fixture's decodes: narrow, so a weak model's lattices stay small.
SEARCH = ["--beam", "10", "--max-active", "1000", "--lattice-beam", "4"]
GRID = ["--lmwt", "6:12", "--wip", "0.0,0.5"]


def run(*args: object) -> str:
    """``asrtrain ARGS`` in this process (no interpreter start); fails the test on an error."""
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, f"{args[:2]}: {res.output}"
    return res.output
