from __future__ import annotations

import sys
from pathlib import Path

# minicorpus.py lives here; the fixtures built from it (mini_corpus, mini_lang) are in
# tests/conftest.py, shared with tests/decode so the lang is built once per session.
sys.path.insert(0, str(Path(__file__).resolve().parent))
