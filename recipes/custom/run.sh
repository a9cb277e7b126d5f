#!/usr/bin/env bash
# Your own corpus from the WAVs to a WER: Kaldi data dirs (wav.scp, text, utt2spk; segments and
# sox pipes in wav.scp allowed), a Kaldi dict dir and an LM text. This is the template
# (../utils/hybrid.sh) with your dirs:
#
#   ./run.sh --train DIR --test DIR --dict DIR --lm-text FILE [--dev DIR] [--sample-rate N]
#
# Aligned from nothing (mono -> tri -> LDA+MLLT -> SAT, targets at its HMM states), i-vectors
# and fMLLR, lang and HCLG, the GMM rungs decoded, archives, the BLSTM (trained until the dev
# loss stops improving; final.pt as the sizes rule says), a decode of dev and test over LM
# weights and insertion penalties, the setting picked on dev. The last line printed is the
# test set's WER at that setting.
#
# Without --dev, a few training speakers are held out as dev (deterministically; the log names
# them) and their transcripts are left out of the LM text (prepare lang --exclude-text).
# Without a test text, the test set is transcribed, not scored. Sizes left at 'auto' follow
# the corpus (asrtrain prepare sizes; data/sizes.sh says what they became); any --name
# value overrides one. --speed-perturb true trains everything on 0.9/1.0/1.1 copies (Kaldi's
# 3-way); --speed-perturb network trains the ladder on the originals and the network on all three,
# the copies aligned by the SAT GMM (Kaldi's nnet recipes: data_sp aligned with tri3/tri4).
#
# Stages: 0 data dirs, 1 features and sizes, 2 alignments, 3 i-vectors and fMLLR,
#         4 lang and graph, and the GMM rungs decoded (SAT in two passes), 5 archives,
#         6 train (--realign true: then the network's alignments, lang, archives and a second
#         network, in exp/ali_nnet, data/lang_nnet, data/archives_nnet, exp/blstm_nnet; --lfmmi true:
#         then lattice-free MMI into exp/blstm_lfmmi; --members N: N-1 more networks, each as
#         the first, into exp/blstm_m<k>[_lfmmi], decoded as one in exp/ensemble), 7 decode (both
#         networks with --realign true), 8 score (a line per GMM rung, then the BLSTM's), 9 export (exp/model:
#         the BLSTM at the dev-picked setting). The BLSTM's report is printed last, after stage 9.
# New recordings, once trained:  ./transcribe.sh --data DIR --out DIR (asrtrain transcribe exp/model)
help_message="Usage: $0 --train DIR --test DIR --dict DIR --lm-text FILE [--dev DIR] [--sample-rate N] [--option value ...]"

train=
dev=
test=
dict=
lm_text=
dev_speakers=auto     # held out of train without --dev: auto = 1 in 15 speakers (1 to 10)
speed_perturb=false   # true (the ladder and the network), network (the network only) or false
mfcc_bins=23
# sizes: auto follows the corpus (asrtrain/data/sizes.py), a number overrides
ali_mono_gauss=auto
ali_leaves=auto
ali_gauss=auto
num_pdfs=auto
hidden=auto
layers=auto
proj=auto
epochs=auto
batch=auto
base_batch=auto
lr=auto
lr_schedule=auto      # plateau below 20 h, the papers' anneal beyond (the sizes rule's)
plateau_stop=auto     # with plateau: end at the first plateau after 3 halvings (the sizes rule's)
ubm_components=auto
fmllr_gmm_components=auto
ivector_dim=auto
lm_order=auto
streams=auto          # the network's inputs (the sizes rule's), or a list of fmllr, ivector, logmel
fmllr_source=auto     # the fMLLR stream's: sat (the SAT first pass) or global (the sizes rule's)
hybrid_tree=auto      # the network's pdfs: questions (prepare tree), aligner (the SAT rung's) or counts (the sizes rule's)
context=auto          # frames of each neighbouring chunk the network sees either side (train --context): the sizes rule's (10 below 20 h, else 0)
dropout=auto          # between the LSTM layers (train --dropout): the sizes rule's (0.2 below 20 h, else 0)
spec_augment=auto     # masks of logmel (train --spec-augment): the sizes rule's (F=2,f=8,T=2,t=5 below 20 h, else off)
realign=false         # true: the trained network realigns train and dev, a second network trains on that
lfmmi=auto            # true: then 2 epochs of lattice-free MMI (train-seq on a den graph), that network decoded; auto: the sizes rule's (from 2 h)
members=auto          # networks trained from other seeds and decoded as one (decode --ensemble): the sizes rule's (2 from 2 h to 20 h, else 1)
ali_iters=15
ivector_iters=4
warmup_epochs=1
select=auto           # final.pt: auto = the sizes rule's (the last 3 epochs averaged below 20 h), best, last, average:N
gmm_rungs=auto        # the GMM rungs decoded in stage 4 (none: no baselines)
strategy=auto         # the learners: auto = for this machine (one learner on CPUs or one GPU, SSGD
nproc=auto            #   over a machine's GPUs; asrtrain/data/sizes.py learners_for); a cluster sets both

local_setup() {
  local opt
  for opt in train test dict lm_text; do
    [ -n "${!opt}" ] || die "--${opt//_/-} is required ($help_message)"
  done
  [ -d "$train" ] || die "--train $train: not a directory"
  [ -d "$test" ] || die "--test $test: not a directory"
  [ -d "$dict" ] || die "--dict $dict: not a directory"
  [ -f "$lm_text" ] || die "--lm-text $lm_text: not a file"
  [ -z "$dev" ] || [ -d "$dev" ] || die "--dev $dev: not a directory"
  case "$speed_perturb" in true|false|network) ;; *) die "--speed-perturb must be true, network or false" ;; esac
  local rungs=$gmm_rungs; if [ "$rungs" = auto ]; then rungs=$ali_stages; fi
  if [[ ",$rungs," == *",sat,"* ]] && [[ ",$rungs," != *",lda,"* ]]; then
    die "--gmm-rungs: sat decodes from the lda rung's first pass; list lda too"
  fi
  # the data dirs the stages read: train (dev held out of it, then perturbed, as asked), dev, test
  base_train=$train dev_dir=$dev test_dir=$test
  if [ -z "$dev" ]; then   # dev held out of train: its transcripts leave the LM text too
    base_train=$data/train dev_dir=$data/dev
    lang_opts+=(--exclude-text "$dev_dir/text")
  fi
  train_dir=$base_train
  if [ "$speed_perturb" = true ]; then train_dir=$data/train_sp; fi
  if [ "$speed_perturb" = network ]; then train_copies=sp sp_dir=$data/train_sp_copies; fi
  model=$exp/blstm
}
. "$(dirname "$0")/../utils/hybrid.sh"
