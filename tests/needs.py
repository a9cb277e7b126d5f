"""Where tests find what lives beside the project, and what a missing dependency means.

Data shared by every checkout (Kaldi's yesno corpus, archives written by real Kaldi tools)
is found relative to the repository, at ``../shared`` (``$ASRTRAIN_SHARED`` overrides it,
``$ASRTRAIN_YESNO`` the yesno corpus alone), never at a fixed absolute path.

A dependency the project installs (``make install``: the apt packages, the extras) or ships
(``../shared``) that is missing skips a test on a developer's machine but fails it under
``CI=true``: otherwise CI passes by skipping exactly what users rely on. Use
:func:`missing` inside a test or fixture, or the ``needs(why)`` marker (handled in
tests/conftest.py) on a test or module, ``why`` None when nothing is missing.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
YESNO_WAV = re.compile(r"^[01](_[01]){7}\.wav$")


def shared_dir() -> Path:
    """The shared directory: ``$ASRTRAIN_SHARED``, else ``shared`` beside the repository."""
    return Path(os.environ.get("ASRTRAIN_SHARED") or REPO.parent / "shared").resolve()


def yesno_corpus() -> Path:
    """Kaldi's yesno corpus (60 WAVs of openslr.org/resources/1): ``$ASRTRAIN_YESNO`` or shared."""
    env = os.environ.get("ASRTRAIN_YESNO")
    return Path(env).resolve() if env else shared_dir() / "data" / "yesno"


def yesno_wavs() -> list[Path]:
    """The yesno WAVs present (sorted), none when the corpus is absent."""
    where = yesno_corpus()
    return sorted(p for p in where.iterdir() if YESNO_WAV.match(p.name)) if where.is_dir() else []


def yesno_missing(count: int = 60) -> str | None:
    """Why the yesno corpus cannot be used (fewer than ``count`` WAVs), or None."""
    if len(yesno_wavs()) >= count:
        return None
    return (f"Kaldi's yesno corpus (60 WAVs such as 0_0_1_0_1_0_0_1.wav) not found in "
            f"{yesno_corpus()}: set ASRTRAIN_YESNO or ASRTRAIN_SHARED")


def kaldi_arks_dir() -> Path:
    """Archives written by Kaldi's copy-feats (test.ark, test.cm1.ark, ...)."""
    return shared_dir() / "data" / "kaldi"


def in_ci() -> bool:
    """True under a CI runner (``CI=true``, as GitHub, GitLab and most others set it)."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(why: str) -> NoReturn:
    """Skip the test because ``why`` is missing; under CI fail it instead."""
    if in_ci():
        pytest.fail(f"{why} (CI=true: a dependency the project installs or ships must be "
                    "present, not skipped)", pytrace=False)
    pytest.skip(why)
