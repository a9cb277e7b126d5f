"""libespeak-ng through ctypes: audio samples plus the exact sample of every phoneme.

The command-line ``espeak-ng`` cannot say where each phone starts; the library's
phoneme events can (their ``sample`` field is an exact index into the output).
libespeak-ng keeps global state, so there is one :class:`Espeak` per process
(worker processes, never threads).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrtrain.core.errors import AsrtrainError

AUDIO_OUTPUT_SYNCHRONOUS = 2
INITIALIZE_PHONEME_EVENTS = 0x1
CHARS_UTF8 = 1
EVENT_LIST_TERMINATED = 0
EVENT_PHONEME = 7
PARAM_RATE, PARAM_PITCH, PARAM_RANGE = 1, 3, 4
EE_OK = 0
LIBRARY = "libespeak-ng.so.1"
#: Environment variable naming another libespeak-ng to load (a path or a soname).
LIBRARY_ENV = "ASRTRAIN_LIBESPEAK_NG"
APT_HINT = "install the Debian/Ubuntu package libespeak-ng1 (apt-get install espeak-ng)"


class _EventId(ctypes.Union):
    _fields_ = [("number", ctypes.c_int), ("name", ctypes.c_char_p),
                ("string", ctypes.c_char * 8)]


class _Event(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("unique_identifier", ctypes.c_uint),
                ("text_position", ctypes.c_int), ("length", ctypes.c_int),
                ("audio_position", ctypes.c_int), ("sample", ctypes.c_int),
                ("user_data", ctypes.c_void_p), ("id", _EventId)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int,
                             ctypes.POINTER(_Event))


@dataclass
class Synthesis:
    """One utterance: int16 samples and (phoneme name, start sample) in order."""

    samples: np.ndarray
    sample_rate: int
    phonemes: list[tuple[str, int]]


def load_library(name: str) -> ctypes.CDLL:
    """Open libespeak-ng, or fail with the package to install."""
    try:
        return ctypes.CDLL(name)
    except OSError:
        found = ctypes.util.find_library("espeak-ng") if name == LIBRARY else None
        if found:
            return ctypes.CDLL(found)
        raise AsrtrainError(f"{name} not found: {APT_HINT}") from None


class Espeak:
    """The process's espeak-ng engine, synchronous, with phoneme events."""

    def __init__(self, library: str | None = None, data_path: str | None = None) -> None:
        self.lib = load_library(library or os.environ.get(LIBRARY_ENV) or LIBRARY)
        self._declare()
        rate = self.lib.espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0,
                                          data_path.encode() if data_path else None,
                                          INITIALIZE_PHONEME_EVENTS)
        if rate <= 0:
            raise AsrtrainError(f"espeak-ng failed to initialise ({LIBRARY}, data "
                                f"{data_path or 'default'}): {APT_HINT}")
        self.sample_rate = int(rate)
        self._chunks: list[np.ndarray] = []
        self._events: list[tuple[str, int]] = []
        self._callback = _CALLBACK(self._on_audio)  # keep a reference: C holds the pointer
        self.lib.espeak_SetSynthCallback(self._callback)

    def _declare(self) -> None:
        lib = self.lib
        lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        lib.espeak_Initialize.restype = ctypes.c_int
        lib.espeak_SetSynthCallback.argtypes = [_CALLBACK]
        lib.espeak_SetSynthCallback.restype = None
        lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        lib.espeak_SetVoiceByName.restype = ctypes.c_int
        lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.espeak_SetParameter.restype = ctypes.c_int
        lib.espeak_Synth.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint,
                                     ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
                                     ctypes.c_void_p, ctypes.c_void_p]
        lib.espeak_Synth.restype = ctypes.c_int
        lib.espeak_Synchronize.restype = ctypes.c_int
        lib.espeak_TextToPhonemes.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.c_int,
                                              ctypes.c_int]
        lib.espeak_TextToPhonemes.restype = ctypes.c_char_p
        lib.espeak_Info.argtypes = [ctypes.POINTER(ctypes.c_char_p)]
        lib.espeak_Info.restype = ctypes.c_char_p

    def _on_audio(self, wav: ctypes.POINTER(ctypes.c_short), count: int,  # type: ignore[valid-type]
                  events: ctypes.POINTER(_Event)) -> int:  # type: ignore[valid-type]
        if count > 0 and wav:
            self._chunks.append(np.ctypeslib.as_array(wav, shape=(count,)).copy())
        index = 0
        while events[index].type != EVENT_LIST_TERMINATED:
            event = events[index]
            if event.type == EVENT_PHONEME:
                self._events.append((event.id.string.decode("ascii", "replace"), event.sample))
            index += 1
        return 0

    def version(self) -> str:
        """espeak-ng's version string (goes into the corpus fingerprint)."""
        return self.lib.espeak_Info(None).decode()

    def data_path(self) -> Path:
        """The espeak-ng-data directory in use (its ``voices/!v`` holds the variants)."""
        path = ctypes.c_char_p()
        self.lib.espeak_Info(ctypes.byref(path))
        return Path(path.value.decode()) if path.value else Path()

    def set_voice(self, name: str) -> None:
        """Select a voice such as ``en-us`` or ``en-us+f3``; unknown names are errors."""
        if self.lib.espeak_SetVoiceByName(name.encode()) != EE_OK:
            raise AsrtrainError(f"unknown espeak-ng voice {name!r} (see `espeak-ng --voices` "
                                "and its variants `espeak-ng --voices=variant`)")

    def set_prosody(self, rate: int, pitch: int, pitch_range: int) -> None:
        """Words per minute, base pitch 0-100, pitch range 0-100."""
        for param, value in ((PARAM_RATE, rate), (PARAM_PITCH, pitch), (PARAM_RANGE, pitch_range)):
            if self.lib.espeak_SetParameter(param, int(value), 0) != EE_OK:
                raise AsrtrainError(f"espeak-ng rejected parameter {param}={value}")

    def synthesize(self, text: str) -> Synthesis:
        """Speak ``text`` with the current voice; return its samples and phoneme starts."""
        self._chunks, self._events = [], []
        data = text.encode("utf-8") + b"\0"
        status = self.lib.espeak_Synth(data, len(data), 0, 1, 0, CHARS_UTF8, None, None)
        if status != EE_OK or self.lib.espeak_Synchronize() != EE_OK:
            raise AsrtrainError(f"espeak-ng failed (status {status}) on {text[:60]!r}")
        samples = (np.concatenate(self._chunks) if self._chunks
                   else np.zeros(0, dtype=np.int16)).astype(np.int16, copy=False)
        return Synthesis(samples, self.sample_rate, list(self._events))

    def phonemize(self, word: str) -> list[str]:
        """Isolated-word pronunciation as espeak phoneme names (stress marks kept)."""
        buffer = ctypes.c_char_p(word.encode("utf-8"))
        pointer = ctypes.pointer(buffer)
        names: list[str] = []
        separator = ord(" ") << 8
        while pointer.contents.value:
            result = self.lib.espeak_TextToPhonemes(pointer, CHARS_UTF8, separator)
            if not result:
                break
            names.extend(result.decode("utf-8").split())
        return names


_ENGINE: Espeak | None = None
_ENGINE_PID = -1


def engine() -> Espeak:
    """This process's engine, created on first use (a forked child makes its own)."""
    global _ENGINE, _ENGINE_PID
    if _ENGINE is None or _ENGINE_PID != os.getpid():
        _ENGINE, _ENGINE_PID = Espeak(), os.getpid()
    return _ENGINE
