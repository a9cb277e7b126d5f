"""asrtrain: train hybrid BiLSTM-HMM acoustic models fast, on one machine or a cluster.

The system of IBM Research's distributed ASR training papers (SSGD, ADPSGD,
H-ADPSGD), from a Kaldi data directory to a word error rate.
"""

__version__ = "0.1.0"


def __getattr__(name: str):  # noqa: ANN202  (lazy: the CLI starts without torch)
    """``from asrtrain import Transcriber`` without importing torch at ``import asrtrain``."""
    if name == "Transcriber":
        from asrtrain.transcribe.transcriber import Transcriber

        return Transcriber
    raise AttributeError(f"module 'asrtrain' has no attribute {name!r}")
