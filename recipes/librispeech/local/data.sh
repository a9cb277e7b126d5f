# Stage 0 of recipes/librispeech (sourced by ../utils/hybrid.sh): lhotse's manifests of each
# part, Kaldi data dirs from them (data/{train,dev,test}), the dict and the LM text.
echo "=== stage $1: lhotse manifests and Kaldi data dirs ($train_part, $dev_part, $test_part), dict, LM text"
command -v lhotse >/dev/null || die "lhotse not found: pip install -e '.[corpora]' (in the repository root)"
declare -A part_of=([train]=$train_part [dev]=$dev_part [test]=$test_part)
for split in train dev test; do
  part=${part_of[$split]}
  [ -d "$corpus/$part" ] || { echo "$0: no $corpus/$part: download $part.tar.gz from https://www.openslr.org/12 and unpack it in $(dirname "$corpus")" >&2; exit 1; }
done
corpus_abs=$(cd "$corpus" && pwd)   # lhotse writes the audio paths as it is given them
manifests=$data/manifests
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
done_or_run lm-text "$data" local/lm_text.sh "$lm_source" "$data/train" "$data/lm_text"
