"""Fixtures of the scoring tests."""

from __future__ import annotations

import pytest
from needs import missing
from sclite_util import find_sclite


@pytest.fixture
def sclite() -> str:
    exe = find_sclite()
    if exe is None:
        missing("NIST sclite not installed (Debian package sctk; `make test` installs it)")
    return exe
