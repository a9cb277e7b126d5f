#!/usr/bin/env bash
# The embedded recipe: from nothing to a WER on synthesized multi-speaker speech, the stages of
# ../utils/hybrid.sh numbered: 0 corpus, 1 features, 2 alignments (with alignments=learned),
# i-vectors and fMLLR, 3 lang and graph, 4 archives, 5 train, 6 decode, 7 score, 8 export
# (exp/model, for asrtrain transcribe).
#
#   ./run.sh --config conf/demo.conf            # the demo: fits 2 cores, ~15 minutes
#   ./run.sh --config conf/paper.conf           # the paper's model and recipe (GPUs)
#   ./run.sh --stage 5 --stop-stage 5           # rerun training only
#   ./run.sh --config conf/demo.conf --alignments learned   # align from nothing (flat start)
#
# alignments=exact trains on the synthesizer's exact phone alignments; alignments=learned
# ignores them and aligns the corpus with `asrtrain prepare align` (mono -> tri -> LDA+MLLT
# -> SAT), keeping its outputs apart (exp/ali, data/lang_learned, ..._learned) so both can
# be compared; the exact alignments then only measure the learned ones (exp/ali/report.json).
help_message="Usage: $0 [--config conf/demo.conf] [--stage N] [--stop-stage N] [--option value ...]"

stages="data features align,adapt lang archive train decode score export"
stop_stage=8
# corpus
hours=1.0
speakers=24
dev_speakers=3
test_speakers=3
noise_snr=15:40
max_repeats=1
lm_sentences=0
synth_nj=2
alignments=exact
ali_splits="dev test"
ali_mono_gauss=1000
ali_leaves=1000
ali_gauss=6000
ali_iters=15
# HMM states of the tree and the targets: auto (the aligner's where it wrote them, else an
# even split of each phone), states or even; a value other than auto tags the outputs
targets=auto
ubm_components=64
ivector_dim=100
ivector_iters=4
fmllr_gmm_components=64
lm_order=4
num_pdfs=500
# the model and learning-rate recipe: asrtrain train's defaults, the paper's (6 x 512, ...)
# final.pt: the last epoch. On this corpus the held-out loss is lowest at epoch 3 of 8 while frame
# accuracy rises to epoch 8 (dev's one hard voice grows confident and wrong): the same H-ADPSGD run
# decoded 10.70% dev-picked (oracle 8.79%) with --select best, 5.24% (4.68%) with its last epoch
select=last
lmwt=8:15

local_setup() {
  corpus=$data/corpus
  local atag="" ftag="" tag
  if [ "$alignments" = learned ]; then
    atag=_learned
    align_opts=(--phones "$corpus/phones.txt" --reference "$corpus")
  else
    ali=$corpus fmllr_classes=$corpus/train/ali.scp   # the synthesizer's phones for the LDA
  fi
  if [ "$fmllr_source" = sat ]; then
    ftag=_satfmllr
    [ "$alignments" = learned ] || die "--fmllr-source sat needs --alignments learned (the SAT model)"
  fi
  case "$targets" in
    auto) tag=$atag ;;
    states|even) tag=${atag}_$targets ;;
    *) die "--targets must be auto, states or even, got '$targets'" ;;
  esac
  train_dir=$corpus/train dev_dir=$corpus/dev test_dir=$corpus/test dict=$corpus/dict lm_text=$corpus/lm_text
  lang=$data/lang$tag archives=$data/archives$tag$ftag fmllr_dir=$exp/fmllr$atag
  model=$exp/blstm_${strategy}$tag$ftag
  lang_opts=(--targets "$targets")
  result_title='Test speakers, $strategy on $nproc learners, at the setting picked on dev:'
}
. "$(dirname "$0")/../utils/hybrid.sh"
