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
# Stages: 1 logmel features, 3 graph map, 4 archives, 5 train, 6 decode, 7 score
# (numbered as in recipes/synth).
set -euo pipefail
cd "$(dirname "$0")"
help_message="Usage: $0 --config conf/swbd300.conf [--stage N] [--stop-stage N] [--option value ...]"

stage=1
stop_stage=7
force=false
data=data
exp=exp
seed=0
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
ivector_period=10
graph_dir=
kaldi_mdl=
kaldi_phones=
# model and training: the paper's
hidden=512
layers=6
proj=256
epochs=16
batch=2560
base_batch=256
lr=0.1
warmup_epochs=10
strategy=h-adpsgd
nproc=8
group_size=4
topology=ring
# decoding
acwt=0.1
lmwt=8:15
beam=13
max_active=7000
decode_nj=16
feat_nj=16
sample_rate=8000
# scoring: extra rows of the report (NAME=GLOB on the STM file / utterance id)
score_subsets="swbd=sw_* callhome=en_*"

. ../utils/parse_options.sh
. ./path.sh
. ./cmd.sh
. ../utils/stage.sh

for v in train_fmllr_scp train_ivector_scp train_data_dir train_pdf_ali_scp dev_fmllr_scp \
         dev_ivector_scp dev_data_dir dev_pdf_ali_scp eval_fmllr_scp eval_ivector_scp \
         eval_data_dir num_pdfs graph_dir; do
  [ -n "${!v}" ] || { echo "$0: --${v//_/-} is required (see the header of this script)" >&2; exit 2; }
done

archives=$data/archives
model=$exp/blstm_${strategy}
tid_map_opt=()
group_opt=()   # super-learners exist only in H-ADPSGD
if [ "$strategy" = h-adpsgd ]; then group_opt=(--group-size "$group_size"); fi
if [ -z "$eval_text" ] && [ -f "$eval_data_dir/text" ]; then eval_text=$eval_data_dir/text; fi

if want_stage 1; then
  echo "=== stage 1: log-mel features (40 bins + Δ + ΔΔ) from the Kaldi data dirs"
  for pair in train:"$train_data_dir" dev:"$dev_data_dir" eval:"$eval_data_dir"; do
    name=${pair%%:*}; dir=${pair#*:}
    done_or_run "logmel-$name" "$data/logmel/$name" \
      asrtrain prepare features "$dir" "$data/logmel/$name" --type logmel --num-bins 40 --deltas \
        --sample-rate "$sample_rate" --nj "$feat_nj"
  done
fi

tid2pdf() {  # tid2pdf OUT: 'transition-id pdf phone-id hmm-state' lines of $kaldi_mdl
  command -v show-transitions >/dev/null || { echo "$0: show-transitions (Kaldi) not on PATH" >&2; return 1; }
  # A Transition-state line gives the pdf ('pdf = P', or 'forward-pdf = F self-loop-pdf = S'
  # for non-HMM topologies); the self-loop transition-id then takes S, the others F.
  show-transitions "$kaldi_phones" "$kaldi_mdl" | awk -v phones="$kaldi_phones" '
    BEGIN { while ((getline l < phones) > 0) { split(l, f, " "); id[f[1]] = f[2] } }
    /^Transition-state/ {
      for (i = 1; i < NF; i++) {
        if ($i == "phone") ph = $(i + 2); else if ($i == "hmm-state") hs = $(i + 2)
        else if ($i == "pdf") fwd = loop = $(i + 2)
        else if ($i == "forward-pdf") fwd = $(i + 2); else if ($i == "self-loop-pdf") loop = $(i + 2)
      }
      if (!(ph in id)) { printf "show-transitions: phone %s is not in %s\n", ph, phones > "/dev/stderr"; exit 1 }
    }
    /^ *Transition-id = / { print $3, (/\[self-loop\]/ ? loop : fwd), id[ph], hs }' > "$1.tmp" || return 1
  [ -s "$1.tmp" ] || { echo "$0: show-transitions printed no transition-ids" >&2; return 1; }
  mv "$1.tmp" "$1"
}

if want_stage 3 && [ -n "$kaldi_mdl" ]; then
  echo "=== stage 3: transition-id -> pdf map of the Kaldi graph ($kaldi_mdl)"
  mkdir -p "$data/graph_map"
  done_or_run graph-map "$data/graph_map" tid2pdf "$data/graph_map/tid2pdf"
fi
if [ -f "$data/graph_map/tid2pdf" ]; then tid_map_opt=(--tid2pdf "$data/graph_map/tid2pdf"); fi

to_recording_time() {  # CTM with utterance ids -> file, channel and times of the recordings
  local segs=$eval_data_dir/segments r2fc=$eval_data_dir/reco2file_and_channel
  if [ ! -f "$segs" ]; then cat "$1"; return; fi   # one recording per utterance: as it is
  awk -v segs="$segs" -v r2fc="$r2fc" '
    BEGIN { while ((getline l < segs) > 0) { split(l, f, " "); reco[f[1]] = f[2]; t0[f[1]] = f[3] }
            while ((getline l < r2fc) > 0) { split(l, f, " "); file[f[1]] = f[2]; chan[f[1]] = f[3] } }
    !($1 in reco) { printf "%s: utterance %s is not in %s\n", FILENAME, $1, segs > "/dev/stderr"; exit 1 }
    { r = reco[$1]; start = $3 + t0[$1]
      $1 = (r in file) ? file[r] : r; $2 = (r in chan) ? chan[r] : $2; $3 = sprintf("%.2f", start)
      print }' "$1"
}

archive() {  # archive NAME FMLLR IVECTOR [PDF_ALI]
  local name=$1 fmllr=$2 ivec=$3 ali=${4:-}
  local fbank=$data/logmel/$name
  local ali_opts=()
  [ -n "$ali" ] && ali_opts=(--ali "$ali" --num-pdfs "$num_pdfs")
  done_or_run "archive-$name" "$archives" \
    asrtrain prepare archive "$archives/$name.h5" \
      --stream fmllr="$fmllr" --stream ivector="$ivec" --ivector-period ivector="$ivector_period" \
      --stream logmel="$fbank/feats.scp" \
      --cmvn logmel="$fbank/cmvn.scp" --utt2spk "$fbank/utt2spk" "${ali_opts[@]}"
}

if want_stage 4; then
  echo "=== stage 4: archives (fmllr 40 + ivector 100 + logmel+deltas 120 = 260)"
  archive train "$train_fmllr_scp" "$train_ivector_scp" "$train_pdf_ali_scp"
  archive dev "$dev_fmllr_scp" "$dev_ivector_scp" "$dev_pdf_ali_scp"
  archive eval "$eval_fmllr_scp" "$eval_ivector_scp"
fi

if want_stage 5; then
  echo "=== stage 5: train with $strategy on $nproc learners (groups of $group_size)"
  done_or_run train "$model" \
    $train_cmd --nproc "$nproc" "$model/log/run.log" \
      asrtrain train "$archives/train.h5" "$model" --valid "$archives/dev.h5" \
        --hidden "$hidden" --layers "$layers" --proj "$proj" --epochs "$epochs" --batch "$batch" \
        --base-batch "$base_batch" --lr "$lr" --warmup-epochs "$warmup_epochs" --seed "$seed" \
        --strategy "$strategy" --nproc "$nproc" "${group_opt[@]}" --topology "$topology"
fi

if want_stage 6; then
  echo "=== stage 6: decode eval2000"
  text_opt=()
  [ -n "$eval_text" ] && text_opt=(--text "$eval_text")
  done_or_run decode-eval "$model/decode_eval" \
    $decode_cmd "$model/decode_eval/log/run.log" \
      asrtrain decode "$model/final.pt" "$graph_dir" "$archives/eval.h5" "$model/decode_eval" \
        "${text_opt[@]}" "${tid_map_opt[@]}" --nj "$decode_nj" --acwt "$acwt" --lmwt "$lmwt" \
        --beam "$beam" --max-active "$max_active"
fi

if want_stage 7; then
  echo "=== stage 7: score (Hub5'00: sw_* = Switchboard, en_* = CallHome)"
  decode=$model/decode_eval
  opts=()
  if [ -n "$eval_glm" ]; then opts+=(--glm "$eval_glm"); fi
  read -ra subsets <<< "$score_subsets"   # (read: no globbing of sw_*)
  for sub in "${subsets[@]}"; do opts+=(--subset "$sub"); done
  if [ -n "$eval_stm" ]; then
    # the decode's CTMs (utterance time) in recording time, then the sweep against the STM
    scored=$decode/scoring_stm
    rm -rf "$scored"; mkdir -p "$scored/hyp"
    for ctm in "$decode"/ctm/*.ctm; do
      to_recording_time "$ctm" > "$scored/hyp/$(basename "$ctm" .ctm).txt"
    done
    asrtrain score --sweep "$scored" --ref "$eval_stm" --hyp-format ctm "${opts[@]}"
    cp "$scored/best_wer" "$decode/best_wer"
  else
    asrtrain score --sweep "$decode" "${opts[@]}"
  fi
  cat "$decode/best_wer"
fi
