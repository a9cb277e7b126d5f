#!/usr/bin/env bash
# Kaldi's yesno corpus (egs/yesno/s5) from the WAVs to a WER: 60 recordings of one speaker
# saying eight YES/NO words each (8 kHz); sorted by name, 31 train and 29 test (232 words).
# Aligned from nothing (flat-start HMM-GMM ladder), then the BLSTM hybrid: the stages of
# ../utils/hybrid.sh (0 data, 1 features, 2 alignments, 3 i-vectors and fMLLR, 4 lang and
# graph, 5 archives, 6 train, 7 decode, 8 score, 9 export: exp/model at the LM weight best on
# test, an oracle).
#
#   ./run.sh --config conf/yesno.conf           # 2 cores, about a minute, 0.00% WER
#   ./run.sh --yesno /path/to/waves_yesno       # the corpus elsewhere
#   ./run.sh --stage 6 --stop-stage 6           # rerun training (it resumes from its newest
#                                               # checkpoint: remove exp/blstm_* to start over)
help_message="Usage: $0 [--config conf/yesno.conf] [--stage N] [--stop-stage N] [--option value ...]"

yesno=/work/shared/data/yesno
num_train=31          # the first num_train WAVs (sorted by name) train, the rest test
# one speaker: no dev set to spare, so test is aligned with train (its archive has targets),
# the held-out loss is the training archive's own (it shows convergence, not generalisation),
# and the LM weight is the best on test, an oracle (recipes/custom/conf/yesno.conf holds two
# utterances out and picks on them)
splits="train test"
ali_splits=test
valid_split=train
sample_rate=8000
wip=                  # penalty 0 only; one lattice search, every LM weight read off it
. "$(dirname "$0")/conf/yesno.conf"   # the sizes (and why), also without --config

local_setup() {
  model=$exp/blstm_$strategy
  oracle_title='Test utterances, best LM weight on test (oracle) ($picked), $strategy on $nproc learners:'
}
. "$(dirname "$0")/../utils/hybrid.sh"
