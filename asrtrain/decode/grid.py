"""The decode grid: LM weights × word insertion penalties, and the names of its outputs.

One decoding pass per (LM weight, penalty) pair, as Kaldi's ``local/score.sh`` scores
one lattice per pair. Outputs are named ``<lmwt>`` (``hyp/10.txt``, ``wer_10``) while
the only penalty is 0, as before penalties existed, and with Kaldi's ``<lmwt>_<wip>``
(``hyp/10_0.5.txt``, ``wer_10_0.5``) once several are decoded. ``decode`` writes these
names and ``score`` reads them back; both go through this module.
"""

from __future__ import annotations

import math
import re

from asrtrain.core.errors import ConfigError

#: ``--lmwt`` when none is given (Kaldi's ``local/score.sh`` sweeps 7..17 on real speech).
DEFAULT_LMWT = "8:15"
#: The search's defaults, shared by ``asrtrain decode``, the decoders and the recipes (which
#: pass a value only to change it): Kaldi's decode.sh beam and max-active, and its recipes'
#: ``--lattice-beam``; the acoustic scale of a single pass (Kaldi's 0.1).
DEFAULT_BEAM = 13.0
DEFAULT_MAX_ACTIVE = 7000
DEFAULT_LATTICE_BEAM = 8.0
DEFAULT_ACWT = 0.1
#: ``--wip`` when none is given: penalty 0 only, i.e. the outputs of a decode without one.
DEFAULT_WIP = "0.0"

_NAME = re.compile(r"^(\d+(?:\.\d+)?)(?:_([-+]?\d+(?:\.\d+)?))?$")


def parse_lmwt(spec: str | None, acwt: float) -> list[float]:
    """``8:15`` (inclusive range), ``8,10,12`` or ``10``; empty: the single weight 1/acwt."""
    if spec is None or not str(spec).strip():
        if not (math.isfinite(acwt) and acwt > 0):
            raise ConfigError(f"--acwt must be a finite positive number, got {acwt}")
        return [1.0 / acwt]
    try:
        if ":" in spec:
            lo, hi = (int(x) for x in spec.split(":"))
            values = [float(w) for w in range(lo, hi + 1)]
        else:
            values = [float(x) for x in spec.split(",")]
    except ValueError:
        raise ConfigError(f"--lmwt {spec!r}: expected A:B, a list A,B,C or a number") from None
    if not values or not all(math.isfinite(w) and w > 0 for w in values):
        raise ConfigError(f"--lmwt {spec!r}: LM weights must be finite positive numbers")
    return values


def parse_wip(spec: str | None) -> list[float]:
    """``0.0,0.5,1.0`` or one number (Kaldi's ``--word_ins_penalty`` list); empty: 0 only."""
    if spec is None or not str(spec).strip():
        spec = DEFAULT_WIP
    try:
        values = [float(x) for x in str(spec).split(",")]
    except ValueError:
        raise ConfigError(f"--wip {spec!r}: expected a number or a list A,B,C") from None
    if not all(math.isfinite(p) for p in values):
        raise ConfigError(f"--wip {spec!r}: penalties must be finite numbers")
    if len({wip_name(p) for p in values}) != len(values):
        raise ConfigError(f"--wip {spec!r}: a penalty is given twice")
    return values


def lmwt_name(w: float) -> str:
    """``10`` for 10.0, ``7.5`` for 7.5: the file name of a weight's outputs."""
    return f"{w:g}"


def wip_name(p: float) -> str:
    """``0.0``, ``0.5``, ``1.0``: Kaldi's spelling of its default penalties (one decimal at least)."""
    text = f"{p:g}"
    return text if "." in text or "e" in text else f"{text}.0"


def plain_names(wips: list[float]) -> bool:
    """True when outputs keep the ``<lmwt>`` names: penalty 0 is the only one."""
    return len(wips) == 1 and wips[0] == 0.0


def setting_name(w: float, p: float, wips: list[float]) -> str:
    """The output name of the pass (w, p) in a decode of penalties ``wips``."""
    return lmwt_name(w) if plain_names(wips) else f"{lmwt_name(w)}_{wip_name(p)}"


def settings(lmwts: list[float], wips: list[float]) -> list[tuple[float, float, str]]:
    """Every (LM weight, penalty, name) of the grid, LM weight outer."""
    return [(w, p, setting_name(w, p, wips)) for w in lmwts for p in wips]


def parse_setting(name: str) -> tuple[float, float] | None:
    """``10`` → (10, 0); ``10_0.5`` → (10, 0.5); None for any other name."""
    m = _NAME.match(name)
    if m is None:
        return None
    return float(m.group(1)), float(m.group(2) or 0.0)
