#!/usr/bin/env bash
# Switchboard-300/2000 with an existing Kaldi setup (egs/swbd/s5c): the paper's experiment.
#
# asrtrain enters at the archive stage with what Kaldi already made:
#   - fMLLR features (steps/nnet/make_fmllr_feats.sh), 40 dims      -> *_fmllr_scp
#   - online i-vectors (steps/online/nnet2/extract_ivectors_online.sh), 100 dims, every 10 frames
#                                                                   -> *_ivector_scp
#   - the Kaldi data dirs (wav.scp with sph2pipe pipes, utt2spk, text)    -> *_data_dir
#     (asrtrain computes the 40 log-mel bins with Δ and ΔΔ from them, as in recipes/synth)
#   - pdf alignments: ali-to-pdf exp/tri4_ali_nodup/final.mdl "ark:gunzip -c exp/tri4_ali_nodup/ali.*.gz|" \
#       ark,scp:pdf_ali.ark,pdf_ali.scp                         -> *_pdf_ali_scp
#   - a decoding graph whose input labels are pdf+1 (asrtrain prepare lang), or Kaldi's own
#     HCLG (utils/mkgraph.sh) with transition-id input labels plus the map from
#     `show-transitions phones.txt final.mdl` (stage 3 makes it when $kaldi_mdl is set);
#   - the eval2000 STM and GLM (data/eval2000/stm, data/eval2000/glm); the decode's CTMs are
#     put in recording time through the eval data dir's segments and reco2file_and_channel
#     (as Kaldi's convert_ctm.pl does) and scored against the STM. Without an STM the
#     eval text ($eval_data_dir/text unless --eval-text) is the reference.
#
#   ./run.sh --config conf/swbd300.conf            # stages 1..7
#
# Stages of ../utils/hybrid.sh: 1 logmel features, 3 graph map (local/kaldi.sh), 4 archives,
# 5 train, 6 decode, 7 score (local/kaldi.sh: against the STM).
help_message="Usage: $0 --config conf/swbd300.conf [--stage N] [--stop-stage N] [--option value ...]"

stages="- features - graph archive train decode score"
stage=1
stop_stage=7
splits="train dev eval"
feature_types=logmel
sample_rate=8000
nj=16
# the Kaldi side
train_fmllr_scp=
train_ivector_scp=
train_data_dir=
train_pdf_ali_scp=
dev_fmllr_scp=
dev_ivector_scp=
dev_data_dir=
dev_pdf_ali_scp=
eval_fmllr_scp=
eval_ivector_scp=
eval_data_dir=
eval_text=
eval_stm=
eval_glm=
num_pdfs=
graph_dir=
kaldi_mdl=
kaldi_phones=
# the paper's model and learning-rate recipe (asrtrain train's defaults) at batch 2560, on 8
# learners in super-learners of 4
batch=2560
nproc=8
group_size=4
lmwt=8:15
wip=                  # penalty 0 only, a decoding pass per LM weight
lattices=false
# scoring: extra rows of the report (NAME=GLOB on the STM file / utterance id)
score_subsets="swbd=sw_* callhome=en_*"

. "$(dirname "$0")/local/kaldi.sh"   # local_setup, local_graph, local_score
. "$(dirname "$0")/../utils/hybrid.sh"
