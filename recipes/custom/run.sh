#!/usr/bin/env bash
# Your own corpus from the WAVs to a WER, in one recipe: Kaldi data dirs (wav.scp, text,
# utt2spk; segments and sox pipes in wav.scp allowed), a Kaldi dict dir and an LM text.
#
#   ./run.sh --train DIR --test DIR --dict DIR --lm-text FILE [--dev DIR] [--sample-rate N]
#
# Aligned from nothing (prepare align: mono -> tri -> LDA+MLLT -> SAT, targets at its HMM
# states), i-vectors and fMLLR, lang and HCLG, archives, the BLSTM (final.pt picked by dev
# loss), a decode of dev and test over LM weights and insertion penalties, the setting
# picked on dev. The last line printed is the test set's WER at that setting.
#
# Without --dev, a few training speakers are held out as dev (deterministically; the log
# names them). Without a test text, the test set is transcribed, not scored. Sizes (tree,
# Gaussians, BLSTM, epochs, LM order) left at 'auto' follow the corpus (asrtrain prepare
# sizes; data/sizes.sh says what they became); any --name value overrides one.
# --speed-perturb true trains on 0.9/1.0/1.1 copies of the training data (Kaldi's 3-way).
#
# Stages: 0 data dirs, 1 features and sizes, 2 alignments, 3 i-vectors and fMLLR,
#         4 lang and graph, and the GMM rungs decoded (SAT in two passes), 5 archives,
#         6 train, 7 decode, 8 score (a line per GMM rung, then the BLSTM's).
# New recordings, once trained:  ./transcribe.sh --data DIR --out DIR
set -euo pipefail
cd "$(dirname "$0")"

help_message="Usage: $0 --train DIR --test DIR --dict DIR --lm-text FILE [--dev DIR] [--sample-rate N] [--option value ...]"

# --- inputs ---
train=
dev=
test=
dict=
lm_text=
sample_rate=16000
# --- run ---
stage=0
stop_stage=8
force=false
data=data
exp=exp
seed=0
nj=2
# dev held out of train when --dev is not given: speakers, auto = 1 in 15 (1 to 10)
dev_speakers=auto
speed_perturb=false
# features
mfcc_bins=23
dither=1
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
ubm_components=auto
fmllr_gmm_components=auto
ivector_dim=auto
lm_order=auto
# alignment ladder
ali_stages=mono,tri,lda,sat
mono_utts=0
mono_iters=25
ali_iters=15
ali_max_lost=0.05
ali_nj=               # alignment jobs; empty: --nj
ali_job_cmd=          # what starts each (prepare align --job-cmd); empty: cmd.sh's align_cmd
# i-vectors
ivector_period=10
ivector_iters=4
# archives and training (the paper's 21-frame chunks; final.pt by dev loss)
chunk=21
warmup_epochs=1
select=best
lr_schedule=paper
strategy=h-adpsgd
nproc=4
group_size=2
# GMM baselines (Kaldi's RESULTS rungs): each rung's graph, dev and test decoded, SAT in two
# passes (speaker-independent LDA+MLLT first, fMLLR from its best paths); auto: every rung of
# --ali-stages; none: no baselines
gmm_rungs=auto
# Kaldi's decode.sh has beam 13, max-active 7000, lattice beam 6; our lattice determinization
# slows down more with the lattice beam than Kaldi's (speechocean762's monophones: 1.4 s for a
# 2.8 s utterance at max-active 2000 and lattice beam 4, 300 s at 7000 and 8)
gmm_acwt=0.0833
gmm_lmwt=6:18
gmm_beam=13
gmm_max_active=2000
gmm_lattice_beam=4
# the network's fMLLR stream: sat (the SAT rung's features; dev/test transforms from the GMM
# first pass, Kaldi's way for nnet inputs) or global (prepare fmllr: a global GMM, no transcripts)
fmllr_source=global
# the network's inputs: the archive's streams (auto: the sizes rule's, asrtrain/data/sizes.py;
# a list of fmllr, ivector, logmel), and regularisation
streams=auto
dropout=0.0
spec_augment=off
# decoding: one lattice search per utterance, every LM weight and word insertion penalty
# read off the lattices (Kaldi's score.sh grid, wider), swept on dev and test, picked on dev;
# lattices=false decodes once per pair instead
lattices=true
lattice_beam=8
lmwt=4:20
wip=0.0,0.5,1.0
beam=13
max_active=7000

. ../utils/parse_options.sh
. ./path.sh
. ./cmd.sh
. ../utils/stage.sh
. ../utils/lattice_opts.sh
[ -n "$ali_nj" ] || ali_nj=$nj
[ -n "$ali_job_cmd" ] || ali_job_cmd=$align_cmd

die() { echo "$0: $*" >&2; exit 2; }
for opt in train test dict lm_text; do
  [ -n "${!opt}" ] || die "--${opt//_/-} is required ($help_message)"
done
[ -d "$train" ] || die "--train $train: not a directory"
[ -d "$test" ] || die "--test $test: not a directory"
[ -d "$dict" ] || die "--dict $dict: not a directory"
[ -f "$lm_text" ] || die "--lm-text $lm_text: not a file"
[ -z "$dev" ] || [ -d "$dev" ] || die "--dev $dev: not a directory"
case "$speed_perturb" in true|false) ;; *) die "--speed-perturb must be true or false" ;; esac
case "$fmllr_source" in global|sat) ;; *) die "--fmllr-source must be global or sat" ;; esac
if [ "$gmm_rungs" = auto ]; then gmm_rungs=$ali_stages; elif [ "$gmm_rungs" = none ]; then gmm_rungs=; fi
if [[ ",$gmm_rungs," == *",sat,"* ]] && [[ ",$gmm_rungs," != *",lda,"* ]]; then
  die "--gmm-rungs: sat decodes from the lda rung's first pass; list lda too"
fi
if [ "$fmllr_source" = sat ] && [[ ",$gmm_rungs," != *",sat,"* ]]; then
  die "--fmllr-source sat needs the SAT rung's first pass (--gmm-rungs with sat)"
fi

lang=$data/lang
ali=$exp/ali
archives=$data/archives
model=$exp/blstm
group_opt=()   # super-learners exist only in H-ADPSGD
if [ "$strategy" = h-adpsgd ]; then group_opt=(--group-size "$group_size"); fi
has_text() { [ -s "$1/text" ]; }
declare -i stage_start=$SECONDS
took() { echo "[$(date +%T)] stage $1 took $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }

# the data dirs the stages read: train (dev held out of it, then perturbed, as asked), dev, test
base_train=$train; dev_dir=$dev
if [ -z "$dev" ]; then base_train=$data/train; dev_dir=$data/dev; fi
train_dir=$base_train
if [ "$speed_perturb" = true ]; then train_dir=$data/train_sp; fi
splits=(train dev test)
src() { case "$1" in train) echo "$train_dir" ;; dev) echo "$dev_dir" ;; test) echo "$test" ;; esac; }

if want_stage 0; then
  echo "=== stage 0: data dirs (train $train, dev ${dev:-held out of train}, test $test)"
  if [ -z "$dev" ]; then
    n=$dev_speakers
    if [ "$n" = auto ]; then
      s=$(awk '{print $2}' "$train/utt2spk" | sort -u | wc -l)
      [ "$s" -ge 2 ] || die "$train has $s speaker(s): give a dev set (--dev DIR)"
      n=$(( s / 15 )); [ "$n" -ge 1 ] || n=1; [ "$n" -le 10 ] || n=10
    fi
    done_or_run subset "$data/dev" \
      asrtrain prepare subset "$train" "$data/train" "$data/dev" --dev-speakers "$n"
  fi
  asrtrain prepare check-dirs --train "$base_train" --dev "$dev_dir" --test "$test"
  if [ "$speed_perturb" = true ]; then
    done_or_run perturb "$train_dir" \
      asrtrain prepare perturb "$base_train" "$train_dir" --speeds 0.9,1.0,1.1
  fi
  took 0
fi

if want_stage 1; then
  echo "=== stage 1: features (MFCC for alignment and adaptation, logmel + deltas for the network)"
  for split in "${splits[@]}"; do
    done_or_run "mfcc-$split" "$data/mfcc/$split" \
      asrtrain prepare features "$(src "$split")" "$data/mfcc/$split" --type mfcc --num-bins "$mfcc_bins" \
        --dither "$dither" --sample-rate "$sample_rate" --nj "$nj"
    done_or_run "logmel-$split" "$data/logmel/$split" \
      asrtrain prepare features "$(src "$split")" "$data/logmel/$split" --type logmel --num-bins 40 --deltas \
        --dither "$dither" --sample-rate "$sample_rate" --nj "$nj"
  done
  asrtrain prepare sizes "$data/mfcc/train" --lm-text "$lm_text" --chunk "$chunk" > "$data/sizes.sh.tmp"
  mv "$data/sizes.sh.tmp" "$data/sizes.sh"
  # what transcribe.sh needs to treat new recordings as these were treated
  mkdir -p "$exp"
  printf '%s\n' "sample_rate=$sample_rate" "dither=$dither" "mfcc_bins=$mfcc_bins" \
    "ivector_period=$ivector_period" "chunk=$chunk" "beam=$beam" "max_active=$max_active" \
    > "$exp/features.sh"
  took 1
fi

# sizes left at auto take the corpus' values (data/sizes.sh, written by stage 1)
if [ -f "$data/sizes.sh" ]; then
  while IFS='=' read -r name value; do
    case "$name" in \#*|'') continue ;; esac
    if [ "${!name-}" = auto ]; then printf -v "$name" '%s' "$value"; fi
  done < "$data/sizes.sh"
fi
if [ "$stop_stage" -ge 2 ]; then
  for name in ali_mono_gauss ali_leaves ali_gauss num_pdfs hidden layers proj epochs batch \
              base_batch lr ubm_components fmllr_gmm_components ivector_dim lm_order; do
    [ "${!name}" != auto ] || die "--${name//_/-} is auto and $data/sizes.sh has no value for it: run stage 1"
  done
fi

if want_stage 2; then
  echo "=== stage 2: alignments from nothing ($ali_stages: $ali_leaves leaves, $ali_gauss Gaussians) of train and dev"
  job_opt=()   # jobs on other hosts (cmd_backend=slurm, or --ali-job-cmd)
  if [ -n "$ali_job_cmd" ]; then job_opt=(--job-cmd "$ali_job_cmd"); fi
  done_or_run align "$ali" \
    asrtrain prepare align "$dict" "$data/mfcc/train" "$ali" --split dev="$data/mfcc/dev" \
      --stages "$ali_stages" --mono-gauss "$ali_mono_gauss" --mono-iters "$mono_iters" \
      --mono-utts "$mono_utts" --leaves "$ali_leaves" --gauss "$ali_gauss" --iters "$ali_iters" \
      --max-lost "$ali_max_lost" --nj "$ali_nj" "${job_opt[@]}"
  took 2
fi

has_stream() { [[ ",$streams," == *",$1,"* ]]; }
if [ "$stop_stage" -ge 3 ]; then
  [ "$streams" != auto ] || die "--streams is auto and $data/sizes.sh has no value for it: run stage 1"
  for name in ${streams//,/ }; do
    case "$name" in fmllr|ivector|logmel) ;; *) die "--streams: unknown stream '$name' (fmllr, ivector, logmel)" ;; esac
  done
fi
if want_stage 3 && has_stream ivector; then
  echo "=== stage 3: i-vectors ($ivector_dim), estimated on train"
  done_or_run ivectors-train "$exp/ivectors/train" \
    asrtrain prepare ivectors "$data/mfcc/train" "$exp/ivectors/train" --ubm-components "$ubm_components" \
      --dim "$ivector_dim" --period "$ivector_period" --online --iters "$ivector_iters" --seed "$seed"
  for split in dev test; do
    done_or_run "ivectors-$split" "$exp/ivectors/$split" \
      asrtrain prepare ivectors "$data/mfcc/$split" "$exp/ivectors/$split" \
        --extractor "$exp/ivectors/train/extractor" --period "$ivector_period" --online
  done
  took 3
fi
if want_stage 3 && has_stream fmllr && [ "$fmllr_source" = global ]; then
  echo "=== stage 3: fMLLR (40, LDA on the aligner's pdfs), estimated on train"
  done_or_run fmllr-train "$exp/fmllr/train" \
    asrtrain prepare fmllr "$data/mfcc/train" "$exp/fmllr/train" --ali "$ali/train/pdf.scp" \
      --gmm-components "$fmllr_gmm_components"
  for split in dev test; do
    done_or_run "fmllr-$split" "$exp/fmllr/$split" \
      asrtrain prepare fmllr "$data/mfcc/$split" "$exp/fmllr/$split" --model "$exp/fmllr/train"
  done
  took 3
fi

if want_stage 4; then
  echo "=== stage 4: lang (lexicon, ${lm_order}-gram LM, tree of ~$num_pdfs pdfs at the aligner's states, HCLG)"
  done_or_run lang "$lang" \
    asrtrain prepare lang "$dict" "$lm_text" "$ali" "$lang" --order "$lm_order" --num-pdfs "$num_pdfs"
  took 4
fi

# the GMM rungs: a graph per tree (tri, lda and sat share one), dev and test decoded with
# lattices; sat adapts each speaker from the lda pass (prepare gmm-graph, decode --first-pass)
gmm=$exp/gmm
gmm_graph() { if [ "$1" = mono ]; then echo "$gmm/graph_mono"; else echo "$gmm/graph_tri"; fi; }
if want_stage 4 && [ -n "$gmm_rungs" ]; then
  echo "=== stage 4: GMM baselines ($gmm_rungs) on dev and test"
  for rung in ${gmm_rungs//,/ }; do
    [ -f "$ali/models/$rung.pt" ] || die "no $ali/models/$rung.pt: --gmm-rungs must be among --ali-stages"
    graph=$(gmm_graph "$rung")
    done_or_run "graph-$(basename "$graph")" "$graph" \
      asrtrain prepare gmm-graph "$lang" "$ali/models/$rung.pt" "$graph"
    for split in dev test; do
      adapt=()
      if [ "$rung" = sat ]; then adapt=(--first-pass "$gmm/decode_lda_$split"); fi
      text_opt=()
      if has_text "$(src "$split")"; then text_opt=(--text "$(src "$split")/text"); fi
      done_or_run "decode-$rung-$split" "$gmm/decode_${rung}_$split" \
        $decode_cmd "$gmm/decode_${rung}_$split/log/run.log" \
          asrtrain decode "$ali/models/$rung.pt" "$graph" "$data/mfcc/$split" \
            "$gmm/decode_${rung}_$split" "${text_opt[@]}" "${adapt[@]}" --nj "$nj" --lattices \
            --acwt "$gmm_acwt" --lmwt "$gmm_lmwt" --wip "$wip" --beam "$gmm_beam" \
            --max-active "$gmm_max_active" --lattice-beam "$gmm_lattice_beam"
    done
  done
  if [ "$fmllr_source" = sat ] && has_stream fmllr; then   # the network's fMLLR stream for dev and test
    for split in dev test; do
      done_or_run "satfeats-$split" "$exp/fmllr_sat/$split" \
        asrtrain prepare fmllr-feats "$ali/models/sat.pt" "$data/mfcc/$split" "$exp/fmllr_sat/$split" \
          --transforms "$gmm/decode_sat_$split/trans.scp"
    done
  fi
  took 4
fi
fmllr_feats() {   # the fMLLR stream of a split, as --fmllr-source says
  if [ "$fmllr_source" = global ]; then echo "$exp/fmllr/$1/feats.scp"
  elif [ "$1" = train ]; then echo "$ali/fmllr/train/feats.scp"
  else echo "$exp/fmllr_sat/$1/feats.scp"; fi
}

if want_stage 5; then
  echo "=== stage 5: HDF5 archives ($streams); test without targets"
  printf '%s\n' "streams=$streams" "fmllr_source=$fmllr_source" > "$exp/streams.sh"   # for transcribe.sh
  for split in "${splits[@]}"; do
    stream_opts=()
    if has_stream fmllr; then stream_opts+=(--stream fmllr="$(fmllr_feats "$split")"); fi
    if has_stream ivector; then
      stream_opts+=(--stream ivector="$exp/ivectors/$split/ivectors.scp" --ivector-period ivector="$ivector_period")
    fi
    if has_stream logmel; then
      stream_opts+=(--stream logmel="$data/logmel/$split/feats.scp" --cmvn logmel="$data/logmel/$split/cmvn.scp")
    fi
    targets=()
    if [ "$split" != test ]; then
      targets=(--ali "$lang/pdf_ali/$split.scp" --num-pdfs "$(cat "$lang/num_pdfs")")
    fi
    done_or_run "archive-$split" "$archives" \
      asrtrain prepare archive "$archives/$split.h5" --chunk "$chunk" \
        "${stream_opts[@]}" --utt2spk "$(src "$split")/utt2spk" "${targets[@]}"
  done
  took 5
fi

if want_stage 6; then
  echo "=== stage 6: train the BLSTM ($layers x $hidden, proj $proj, $epochs epochs) with $strategy on $nproc learners"
  done_or_run train "$model" \
    $train_cmd --nproc "$nproc" "$model/log/run.log" \
      asrtrain train "$archives/train.h5" "$model" --valid "$archives/dev.h5" \
        --hidden "$hidden" --layers "$layers" --proj "$proj" --epochs "$epochs" --batch "$batch" \
        --base-batch "$base_batch" --lr "$lr" --warmup-epochs "$warmup_epochs" --seed "$seed" \
        --select "$select" --lr-schedule "$lr_schedule" --dropout "$dropout" \
        --spec-augment "$spec_augment" \
        --strategy "$strategy" --nproc "$nproc" "${group_opt[@]}"
  took 6
fi

if want_stage 7; then
  echo "=== stage 7: decode dev and test (LM weights $lmwt, insertion penalties $wip)"
  for split in dev test; do
    text_opt=()
    if has_text "$(src "$split")"; then text_opt=(--text "$(src "$split")/text"); fi
    done_or_run "decode-$split" "$model/decode_$split" \
      $decode_cmd "$model/decode_$split/log/run.log" \
        asrtrain decode "$model/final.pt" "$lang/graph" "$archives/$split.h5" "$model/decode_$split" \
          "${text_opt[@]}" --nj "$nj" --lmwt "$lmwt" --wip "$wip" --beam "$beam" --max-active "$max_active" \
          "${lattice_opt[@]}"
  done
  took 7
fi

if want_stage 8; then
  echo "=== stage 8: score (the LM weight and insertion penalty picked on dev)"
  if has_text "$test" && [ -n "$gmm_rungs" ]; then   # Kaldi's RESULTS: a line per rung
    for rung in ${gmm_rungs//,/ }; do
      asrtrain score --sweep "$gmm/decode_${rung}_test" --pick-on "$gmm/decode_${rung}_dev" \
        --utt2spk "$test/utt2spk" > "$gmm/score_$rung.log" 2>&1
      echo "$rung: $(head -1 "$gmm/decode_${rung}_test/dev_picked_wer" | awk '{NF--; print}')"
    done
  fi
  if has_text "$test"; then
    asrtrain score --sweep "$model/decode_test" --pick-on "$model/decode_dev" \
      --utt2spk "$test/utt2spk"
    picked=$(head -1 "$model/decode_test/dev_picked_wer" | awk '{print $NF}')
    echo
    echo "Test set at the dev-picked setting (${picked##*wer_}); the best on test is an oracle:"
    sed -n '2,$p' "$model/decode_test/dev_picked_wer"
    head -1 "$model/decode_test/dev_picked_wer" | awk '{NF--; print}'
  else
    asrtrain score --sweep "$model/decode_dev"
    best=$(awk '{print $NF}' "$model/decode_dev/best_wer")
    echo "The test set has no text: its transcripts at the dev-picked setting (${best##*wer_}) are"
    echo "$model/decode_test/hyp/${best##*wer_}.txt"
  fi
  # (no "took" line here: the test WER is the last line)
fi
