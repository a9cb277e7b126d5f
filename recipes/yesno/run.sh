#!/usr/bin/env bash
# Kaldi's yesno corpus (egs/yesno/s5) from the WAVs to a WER: 60 recordings of one speaker
# saying eight YES/NO words each (8 kHz); sorted by name, 31 train and 29 test (232 words).
# Aligned from nothing (flat-start HMM-GMM ladder), then the BLSTM hybrid of recipes/synth.
#
#   ./run.sh --config conf/yesno.conf           # 2 cores, about a minute, 0.00% WER
#   ./run.sh --yesno /path/to/waves_yesno       # the corpus elsewhere
#   ./run.sh --stage 6 --stop-stage 6           # rerun training (it resumes from its newest
#                                               # checkpoint: remove exp/blstm_* to start over)
#
# Stages: 0 data, 1 features, 2 alignments, 3 i-vectors and fMLLR, 4 lang and graph,
#         5 archives, 6 train, 7 decode, 8 score. A finished stage is skipped (and says so);
#         an explicit --stage N restarts from stage N (redoing finished work there);
#         --force true redoes everything the stage range covers.
set -euo pipefail
cd "$(dirname "$0")"

help_message="Usage: $0 [--config conf/yesno.conf] [--stage N] [--stop-stage N] [--option value ...]"

# --- defaults (conf/*.conf override them; so does --name value) ---
stage=0
stop_stage=8
force=false
yesno=/work/shared/data/yesno
data=data
exp=exp
seed=0
# corpus: the first num_train WAVs (sorted by name) train, the rest test
num_train=31
# features
sample_rate=8000
feat_nj=2
mfcc_bins=23
dither=64
# alignments from nothing: rungs (a prefix of mono,tri,lda,sat) and their sizes
ali_stages=mono,tri,lda,sat
mono_gauss=200
mono_iters=15
ali_leaves=50
ali_gauss=400
ali_iters=10
# i-vectors and fMLLR
ubm_components=16
ivector_dim=32
ivector_period=10
ivector_iters=3
fmllr_gmm_components=16
# lang
lm_order=1
num_pdfs=9
# archives: frames per chunk, the BLSTM's context in training and decoding (the paper: 21)
chunk=41
# model and training
hidden=128
layers=1
proj=0
epochs=15
batch=32
base_batch=32
lr=0.25
warmup_epochs=1
anneal=0.7071067811865475
strategy=single
nproc=1
group_size=1
topology=ring
# decoding
acwt=0.1
lmwt=20:50
# one lattice search per utterance, the 31 weights read off the lattices (false: 31 passes)
lattices=true
lattice_beam=8
beam=13
max_active=7000
decode_nj=2

. ../utils/parse_options.sh
. ./path.sh
. ./cmd.sh
. ../utils/stage.sh
. ../utils/lattice_opts.sh

lang=$data/lang
ali=$exp/ali
archives=$data/archives
model=$exp/blstm_${strategy}
group_opt=()   # super-learners exist only in H-ADPSGD
if [ "$strategy" = h-adpsgd ]; then group_opt=(--group-size "$group_size"); fi
declare -i stage_start=$SECONDS
took() { echo "[$(date +%T)] stage $1 took $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }

if want_stage 0; then
  echo "=== stage 0: data dirs, dict and LM text from $yesno"
  done_or_run data "$data" \
    local/prepare_data.sh --num-train "$num_train" "$yesno" "$data"
  took 0
fi

if want_stage 1; then
  echo "=== stage 1: features (MFCC for alignment and adaptation, logmel + deltas for the network)"
  for split in train test; do
    done_or_run "mfcc-$split" "$data/mfcc/$split" \
      asrtrain prepare features "$data/$split" "$data/mfcc/$split" --type mfcc --num-bins "$mfcc_bins" \
        --dither "$dither" --sample-rate "$sample_rate" --nj "$feat_nj"
    done_or_run "logmel-$split" "$data/logmel/$split" \
      asrtrain prepare features "$data/$split" "$data/logmel/$split" --type logmel --num-bins 40 --deltas \
        --dither "$dither" --sample-rate "$sample_rate" --nj "$feat_nj"
  done
  took 1
fi

if want_stage 2; then
  echo "=== stage 2: alignments from nothing ($ali_stages) of train and test"
  done_or_run align "$ali" \
    asrtrain prepare align "$data/dict" "$data/mfcc/train" "$ali" --split test="$data/mfcc/test" \
      --stages "$ali_stages" --mono-gauss "$mono_gauss" --mono-iters "$mono_iters" \
      --leaves "$ali_leaves" --gauss "$ali_gauss" --iters "$ali_iters"
  took 2
fi

if want_stage 3; then
  echo "=== stage 3: i-vectors ($ivector_dim) and fMLLR (40), estimated on train, applied to test"
  done_or_run ivectors-train "$exp/ivectors/train" \
    asrtrain prepare ivectors "$data/mfcc/train" "$exp/ivectors/train" --ubm-components "$ubm_components" \
      --dim "$ivector_dim" --period "$ivector_period" --online --iters "$ivector_iters" --seed "$seed"
  done_or_run fmllr-train "$exp/fmllr/train" \
    asrtrain prepare fmllr "$data/mfcc/train" "$exp/fmllr/train" --ali "$ali/train/pdf.scp" \
      --gmm-components "$fmllr_gmm_components"
  done_or_run ivectors-test "$exp/ivectors/test" \
    asrtrain prepare ivectors "$data/mfcc/test" "$exp/ivectors/test" \
      --extractor "$exp/ivectors/train/extractor" --period "$ivector_period" --online
  done_or_run fmllr-test "$exp/fmllr/test" \
    asrtrain prepare fmllr "$data/mfcc/test" "$exp/fmllr/test" --model "$exp/fmllr/train"
  took 3
fi

if want_stage 4; then
  echo "=== stage 4: lang (lexicon, ${lm_order}-gram LM, tree of ~$num_pdfs pdfs, HCLG)"
  done_or_run lang "$lang" \
    asrtrain prepare lang "$data/dict" "$data/lm_text" "$ali" "$lang" \
      --order "$lm_order" --num-pdfs "$num_pdfs"
  took 4
fi

if want_stage 5; then
  echo "=== stage 5: HDF5 archives of the fused input (fMLLR 40 + i-vector $ivector_dim + logmel 120)"
  for split in train test; do
    done_or_run "archive-$split" "$archives" \
      asrtrain prepare archive "$archives/$split.h5" --chunk "$chunk" \
        --stream fmllr="$exp/fmllr/$split/feats.scp" \
        --stream ivector="$exp/ivectors/$split/ivectors.scp" --ivector-period ivector="$ivector_period" \
        --stream logmel="$data/logmel/$split/feats.scp" \
        --cmvn logmel="$data/logmel/$split/cmvn.scp" --utt2spk "$data/$split/utt2spk" \
        --ali "$lang/pdf_ali/$split.scp" --num-pdfs "$(cat "$lang/num_pdfs")"
  done
  took 5
fi

if want_stage 6; then
  echo "=== stage 6: train the BLSTM with $strategy on $nproc learners"
  # One speaker and 31 training utterances: no dev set to spare, and the test set stays
  # unseen, so --valid is the training archive itself. Its loss and frame accuracy only
  # show that training converges, not how well the model generalises.
  done_or_run train "$model" \
    $train_cmd --nproc "$nproc" "$model/log/run.log" \
      asrtrain train "$archives/train.h5" "$model" --valid "$archives/train.h5" \
        --hidden "$hidden" --layers "$layers" --proj "$proj" --epochs "$epochs" --batch "$batch" \
        --base-batch "$base_batch" --lr "$lr" --warmup-epochs "$warmup_epochs" --anneal "$anneal" \
        --seed "$seed" --strategy "$strategy" --nproc "$nproc" "${group_opt[@]}" --topology "$topology"
  took 6
fi

if want_stage 7; then
  echo "=== stage 7: decode the test utterances with HCLG"
  done_or_run decode-test "$model/decode_test" \
    $decode_cmd "$model/decode_test/log/run.log" \
      asrtrain decode "$model/final.pt" "$lang/graph" "$archives/test.h5" "$model/decode_test" \
        --text "$data/test/text" --nj "$decode_nj" --acwt "$acwt" --lmwt "$lmwt" \
        --beam "$beam" --max-active "$max_active" "${lattice_opt[@]}"
  took 7
fi

if want_stage 8; then
  echo "=== stage 8: score"
  asrtrain score --sweep "$model/decode_test" --utt2spk "$data/test/utt2spk"
  best=$(awk '{print $NF}' "$model/decode_test/best_wer")
  echo
  # yesno has one speaker and no dev set: the weight is the best on test, an oracle
  # (recipes/custom/conf/yesno.conf holds two utterances out and picks on them)
  echo "Test utterances, best LM weight on test (oracle) (${best##*_}), $strategy on $nproc learners:"
  cat "$model/decode_test/score/${best##*_}/summary.txt"
  took 8
fi
