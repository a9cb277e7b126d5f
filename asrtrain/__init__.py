"""asrtrain: train hybrid BiLSTM-HMM acoustic models fast, on one machine or a cluster.

The system of IBM Research's distributed ASR training papers (SSGD, ADPSGD,
H-ADPSGD), from a Kaldi data directory to a word error rate.
"""

__version__ = "0.1.0"
