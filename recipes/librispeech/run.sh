#!/usr/bin/env bash
# LibriSpeech from the downloaded corpus to a WER, without Kaldi: lhotse prepares the data
# (local/data.sh), then the stages of ../utils/hybrid.sh: aligned from nothing (monophones ->
# triphones -> LDA+MLLT -> SAT), the paper's BLSTM-HMM system on it.
#
#   ./run.sh --config conf/librispeech100.conf \
#            --corpus /data/LibriSpeech --lexicon /data/librispeech-lexicon.txt
#   ./run.sh --config conf/librispeech100.conf ... --stage 6 --stop-stage 6   # rerun training
#
# Stages: 0 lhotse manifests, Kaldi data dirs, dict and LM text; 1 features; 2 alignments;
#         3 i-vectors and fMLLR; 4 lang and graph; 5 archives; 6 train; 7 decode; 8 score.
# Other parts (train-clean-360, test-other, ...) go to new directories: --data and --exp.
help_message="Usage: $0 [--config conf/librispeech100.conf] --corpus DIR --lexicon FILE [--stage N] [--stop-stage N] [--option value ...]"

# corpus: the directory the openslr.org/12 tarballs unpack to, and the parts used
corpus=/path/to/LibriSpeech
train_part=train-clean-100
dev_part=dev-clean
test_part=test-clean
lexicon=/path/to/librispeech-lexicon.txt
lm_text=              # empty: the training transcripts; else a text file (or .gz), a sentence a line
prep_nj=4
nj=4
ubm_components=512
ivector_dim=100
ivector_iters=5
fmllr_gmm_components=400
ali_mono_gauss=1000
mono_utts=2000        # the flat start on the shortest 2000 utterances, as Kaldi's recipe (0: all)
ali_leaves=2500
ali_gauss=15000
ali_iters=20
ali_nj=2
lm_order=4
num_pdfs=4000
# the model and learning-rate recipe: asrtrain train's defaults, the paper's (6 x 512, ...)
lmwt=8:15

local_setup() {
  lm_source=$lm_text lm_text=$data/lm_text   # local/data.sh writes the LM text from lm_source
  align_opts=(--oov '<UNK>')
  result_title='$test_part at the setting picked on $dev_part ($picked), $strategy on $nproc learners:'
}
. "$(dirname "$0")/../utils/hybrid.sh"
