"""The phone set: espeak-ng's en-us phoneme names folded into one fixed inventory.

espeak distinguishes allophones and stress that a recogniser's phone set should
not (``@2`` and ``a#`` are reduced schwas, ``t#`` a flap, ``r-`` a linking r).
The fold below was measured on the whole vocabulary of the text sources with the
``en-us`` and ``en-us-nyc`` voices (every name they produce is listed), so the
inventory does not depend on which sentences a corpus happens to contain.
"""

from __future__ import annotations

from asrtrain.core.errors import AsrtrainError

SIL = "sil"
EPS = "<eps>"

#: espeak name -> our phones (empty: dropped, its time goes to the previous phone).
FOLD: dict[str, tuple[str, ...]] = {
    "_": (SIL,), "_:": (SIL,), "_!": (SIL,), "_|": (SIL,), "_!_": (SIL,),
    ";": (),
    "@2": ("@",), "a#": ("@",), "@-": ("@",), "a#:": ("@",),
    "I2": ("I",), "I#": ("I",),
    "t#": ("t",), "t2": ("t",), "?": ("t",),
    "r-": ("r",), "n-": ("n",), "l-": ("l",), "m-": ("m",),
    "@L": ("@", "l"),
    "aI3": ("aI@",), "i@3": ("i@",),
    "O": ("O:",), "o": ("oU",), "a:": ("A:",), "x": ("k",),
}

#: The phones after the fold, vowels then consonants (ids 2.. in this order).
PHONES: tuple[str, ...] = (
    "0", "3", "3:", "@", "A:", "A@", "E", "I", "O2", "O:", "O@", "OI", "U", "U@", "V",
    "a", "aI", "aI@", "aU", "aa", "e@", "eI", "i", "i:", "i@", "o@", "oU", "u:",
    "D", "N", "S", "T", "Z", "b", "d", "dZ", "f", "g", "h", "j", "k", "l", "m", "n", "p",
    "r", "s", "t", "tS", "v", "w", "z",
)

#: Unvoiced stops whose closure (exact zeros) espeak emits before the phoneme event.
CLOSURE_STOPS = frozenset({"p", "t", "k", "tS", "t2", "?"})

STRESS = "'," + "%="


def phone_ids() -> dict[str, int]:
    """``<eps>`` 0, ``sil`` 1, then the phones 2..N (the ids of ali.ark)."""
    return {EPS: 0, SIL: 1, **{p: i + 2 for i, p in enumerate(PHONES)}}


def fold(name: str) -> tuple[str, ...]:
    """Our phones for one espeak phoneme name (stress marks ignored)."""
    bare = name.lstrip(STRESS)
    if bare in FOLD:
        return FOLD[bare]
    if bare in _PHONE_SET:
        return (bare,)
    raise AsrtrainError(f"espeak-ng produced phoneme {name!r}, which the phone map does not "
                        "know (a voice outside en-us/en-us-nyc?); add it to asrtrain.synth.phones")


def fold_word(names: list[str]) -> list[str]:
    """A pronunciation in our phones, pauses left out (a word has no silence inside)."""
    return [p for name in names for p in fold(name) if p != SIL]


_PHONE_SET = frozenset(PHONES)
