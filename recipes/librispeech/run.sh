#!/usr/bin/env bash
# LibriSpeech from the downloaded corpus to a WER, without Kaldi: lhotse prepares the data,
# asrtrain aligns it from nothing (flat start, monophones -> triphones -> LDA+MLLT -> SAT),
# then builds the paper's BLSTM-HMM system on it (as recipes/synth does).
#
#   ./run.sh --config conf/librispeech100.conf \
#            --corpus /data/LibriSpeech --lexicon /data/librispeech-lexicon.txt
#   ./run.sh --config conf/librispeech100.conf ... --stage 6 --stop-stage 6   # rerun training
#
# Stages: 0 lhotse manifests, Kaldi data dirs, dict and LM text; 1 features; 2 alignments;
#         3 i-vectors and fMLLR; 4 lang and graph; 5 archives; 6 train; 7 decode; 8 score.
# A finished stage is skipped (and says so); an explicit --stage N restarts from stage N
# (redoing finished work there); --force true redoes everything the stage range covers.
# Other parts (train-clean-360, test-other, ...) go to new directories: --data and --exp.
set -euo pipefail
cd "$(dirname "$0")"

help_message="Usage: $0 [--config conf/librispeech100.conf] --corpus DIR --lexicon FILE [--stage N] [--stop-stage N] [--option value ...]"

# --- defaults (conf/*.conf override them; so does --name value) ---
stage=0
stop_stage=8
force=false
data=data
exp=exp
seed=0
# corpus: the directory the openslr.org/12 tarballs unpack to, and the parts used
corpus=/path/to/LibriSpeech
train_part=train-clean-100
dev_part=dev-clean
test_part=test-clean
lexicon=/path/to/librispeech-lexicon.txt
lm_text=              # empty: the training transcripts; else a text file (or .gz), a sentence a line
prep_nj=4
# features and adaptation
feat_nj=4
ubm_components=512
ivector_dim=100
ivector_period=10
ivector_iters=5
fmllr_gmm_components=400
# alignment from nothing (asrtrain prepare align)
align_stages=mono,tri,lda,sat
mono_gauss=1000
mono_iters=25
mono_utts=2000        # the flat start on the shortest 2000 utterances, as Kaldi's recipe (0: all)
align_leaves=2500
align_gauss=15000
align_iters=20
# lang
lm_order=4
num_pdfs=4000
# model and training
hidden=512
layers=6
proj=256
epochs=16
batch=256
base_batch=256
lr=0.1
warmup_epochs=10
strategy=h-adpsgd
nproc=4
group_size=2
topology=ring
# decoding
acwt=0.1
lmwt=8:15
wip=0.0,0.5,1.0
# one lattice search per utterance, the grid read off the lattices (false: a pass per setting)
lattices=true
lattice_beam=8
# alignment jobs (the speakers split among them): processes here, or each started by
# align_job_cmd (empty: cmd.sh's align_cmd, an srun task each under cmd_backend=slurm)
align_nj=2
align_job_cmd=
beam=13
max_active=7000
decode_nj=4

. ../utils/parse_options.sh
. ./path.sh
. ./cmd.sh
. ../utils/stage.sh
. ../utils/lattice_opts.sh
[ -n "$align_job_cmd" ] || align_job_cmd=$align_cmd

manifests=$data/manifests
dict=$data/dict
lang=$data/lang
archives=$data/archives
ali=$exp/ali
model=$exp/blstm_${strategy}
group_opt=()   # super-learners exist only in H-ADPSGD
if [ "$strategy" = h-adpsgd ]; then group_opt=(--group-size "$group_size"); fi
declare -A part_of=([train]=$train_part [dev]=$dev_part [test]=$test_part)

if want_stage 0; then
  echo "=== stage 0: lhotse manifests and Kaldi data dirs ($train_part, $dev_part, $test_part), dict, LM text"
  command -v lhotse >/dev/null || { echo "$0: lhotse not found: pip install -e '.[corpora]' (in the repository root)" >&2; exit 1; }
  for split in train dev test; do
    part=${part_of[$split]}
    [ -d "$corpus/$part" ] || { echo "$0: no $corpus/$part: download $part.tar.gz from https://www.openslr.org/12 and unpack it in $(dirname "$corpus")" >&2; exit 1; }
  done
  corpus_abs=$(cd "$corpus" && pwd)   # lhotse writes the audio paths as it is given them
  for split in train dev test; do
    part=${part_of[$split]}
    # lhotse skips a part whose manifests exist (even ones cut off by a kill): when this step
    # runs, it starts from none
    if [ ! -f "$manifests/.done.lhotse-$part" ] || stage_forced; then
      rm -f "$manifests/librispeech_recordings_$part.jsonl.gz" "$manifests/librispeech_supervisions_$part.jsonl.gz"
    fi
    done_or_run "lhotse-$part" "$manifests" \
      lhotse prepare librispeech -p "$part" -j "$prep_nj" "$corpus_abs" "$manifests"
    done_or_run "kaldi-$split" "$data/$split" local/kaldi_export.sh "$manifests" "$part" "$data/$split"
  done
  done_or_run dict "$dict" local/prepare_dict.sh "$lexicon" "$dict"
  done_or_run lm-text "$data" local/lm_text.sh "$lm_text" "$data/train" "$data/lm_text"
fi

if want_stage 1; then
  echo "=== stage 1: features (logmel + deltas for the network, MFCC for alignment and adaptation)"
  for split in train dev test; do
    done_or_run "logmel-$split" "$data/logmel/$split" \
      asrtrain prepare features "$data/$split" "$data/logmel/$split" --type logmel --num-bins 40 \
        --deltas --sample-rate 16000 --nj "$feat_nj"
    done_or_run "mfcc-$split" "$data/mfcc/$split" \
      asrtrain prepare features "$data/$split" "$data/mfcc/$split" --type mfcc --sample-rate 16000 \
        --nj "$feat_nj"
  done
fi

if want_stage 2; then
  echo "=== stage 2: alignments from nothing ($align_stages) on $train_part, applied to dev (test is never aligned)"
  job_opt=()   # jobs on other hosts (cmd_backend=slurm, or --align-job-cmd)
  if [ -n "$align_job_cmd" ]; then job_opt=(--job-cmd "$align_job_cmd"); fi
  done_or_run align "$ali" \
    asrtrain prepare align "$dict" "$data/mfcc/train" "$ali" \
      --split dev="$data/mfcc/dev" --oov '<UNK>' \
      --stages "$align_stages" --mono-gauss "$mono_gauss" --mono-iters "$mono_iters" \
      --mono-utts "$mono_utts" \
      --leaves "$align_leaves" --gauss "$align_gauss" --iters "$align_iters" --nj "$align_nj" \
      "${job_opt[@]}"
fi

if want_stage 3; then
  echo "=== stage 3: i-vectors ($ivector_dim) and fMLLR (40), estimated on train, applied to all"
  done_or_run ivectors-train "$exp/ivectors/train" \
    asrtrain prepare ivectors "$data/mfcc/train" "$exp/ivectors/train" --ubm-components "$ubm_components" \
      --dim "$ivector_dim" --period "$ivector_period" --online --iters "$ivector_iters"
  done_or_run fmllr-train "$exp/fmllr/train" \
    asrtrain prepare fmllr "$data/mfcc/train" "$exp/fmllr/train" --ali "$ali/train/pdf.scp" \
      --gmm-components "$fmllr_gmm_components"
  for split in dev test; do
    done_or_run "ivectors-$split" "$exp/ivectors/$split" \
      asrtrain prepare ivectors "$data/mfcc/$split" "$exp/ivectors/$split" \
        --extractor "$exp/ivectors/train/extractor" --period "$ivector_period" --online
    done_or_run "fmllr-$split" "$exp/fmllr/$split" \
      asrtrain prepare fmllr "$data/mfcc/$split" "$exp/fmllr/$split" --model "$exp/fmllr/train"
  done
fi

if want_stage 4; then
  echo "=== stage 4: lang (lexicon, ${lm_order}-gram LM, tree of ~$num_pdfs pdfs, HCLG)"
  done_or_run lang "$lang" \
    asrtrain prepare lang "$dict" "$data/lm_text" "$ali" "$lang" --order "$lm_order" --num-pdfs "$num_pdfs"
fi

if want_stage 5; then
  echo "=== stage 5: HDF5 archives of the fused input (fMLLR 40 + i-vector $ivector_dim + logmel 120)"
  for split in train dev test; do
    targets=()   # the test archive has none: a test set has recordings, not alignments
    if [ "$split" != test ]; then
      targets=(--ali "$lang/pdf_ali/$split.scp" --num-pdfs "$(cat "$lang/num_pdfs")")
    fi
    done_or_run "archive-$split" "$archives" \
      asrtrain prepare archive "$archives/$split.h5" \
        --stream fmllr="$exp/fmllr/$split/feats.scp" \
        --stream ivector="$exp/ivectors/$split/ivectors.scp" --ivector-period ivector="$ivector_period" \
        --stream logmel="$data/logmel/$split/feats.scp" \
        --cmvn logmel="$data/logmel/$split/cmvn.scp" --utt2spk "$data/logmel/$split/utt2spk" \
        "${targets[@]}"
  done
fi

if want_stage 6; then
  echo "=== stage 6: train the BLSTM with $strategy on $nproc learners (groups of $group_size)"
  done_or_run train "$model" \
    $train_cmd --nproc "$nproc" "$model/log/run.log" \
      asrtrain train "$archives/train.h5" "$model" --valid "$archives/dev.h5" \
        --hidden "$hidden" --layers "$layers" --proj "$proj" --epochs "$epochs" --batch "$batch" \
        --base-batch "$base_batch" --lr "$lr" --warmup-epochs "$warmup_epochs" --seed "$seed" \
        --strategy "$strategy" --nproc "$nproc" "${group_opt[@]}" --topology "$topology"
fi

if want_stage 7; then
  echo "=== stage 7: decode $dev_part and $test_part with HCLG (LM weights $lmwt, penalties $wip)"
  # the reference is every utterance of the part: one the archive lacks counts as deleted
  for split in dev test; do
    done_or_run "decode-$split" "$model/decode_$split" \
      $decode_cmd "$model/decode_$split/log/run.log" \
        asrtrain decode "$model/final.pt" "$lang/graph" "$archives/$split.h5" "$model/decode_$split" \
          --text "$data/$split/text" --nj "$decode_nj" --acwt "$acwt" --lmwt "$lmwt" --wip "$wip" \
          --beam "$beam" --max-active "$max_active" "${lattice_opt[@]}"
  done
fi

if want_stage 8; then
  echo "=== stage 8: score (LM weight and penalty picked on $dev_part)"
  asrtrain score --sweep "$model/decode_test" --pick-on "$model/decode_dev"
  picked=$(head -1 "$model/decode_test/dev_picked_wer" | awk '{print $NF}')
  echo
  echo "$test_part at the setting picked on $dev_part (${picked##*/wer_}), $strategy on $nproc learners:"
  sed -n '2,$p' "$model/decode_test/dev_picked_wer"
  cat "$model/decode_test/score/${picked##*/wer_}/summary.txt"
fi
