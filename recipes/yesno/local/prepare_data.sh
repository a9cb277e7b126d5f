#!/usr/bin/env bash
# Kaldi data dirs, dict dir and LM text of the yesno corpus (Kaldi's egs/yesno/s5/local/
# prepare_data.sh, dict and LM in one go).
#   local/prepare_data.sh [--num-train 31] CORPUS_DIR DATA_DIR
# CORPUS_DIR holds the 60 WAVs, each named after its transcript (0=NO, 1=YES, e.g.
# 0_0_1_0_1_0_0_1.wav = "NO NO YES NO YES NO NO YES"); one speaker ("global").
# Sorted by name, the first --num-train files are train, the rest test (31 and 29
# utterances: 248 and 232 words). DATA_DIR gets train/ and test/ (wav.scp, text, utt2spk,
# spk2utt; C-sorted), dict/ (lexicon YES y, NO n; silence phone sil) and lm_text (the
# training transcripts, one a line, no ids).
set -euo pipefail
export LC_ALL=C

num_train=31
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --num-train) num_train=$2 ;;
    *) echo "$0: unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
[ $# -eq 2 ] || { echo "Usage: $0 [--num-train N] CORPUS_DIR DATA_DIR" >&2; exit 2; }
[ -d "$1" ] || { echo "$0: no corpus dir $1" >&2; exit 1; }
corpus=$(cd "$1" && pwd)
data=$2

mapfile -t wavs < <(cd "$corpus" && ls | grep -E '^[01](_[01])*\.wav$' | sort)
n=${#wavs[@]}
if [ "$n" -le "$num_train" ]; then
  echo "$0: $corpus has $n yesno WAVs, not more than --num-train $num_train" >&2; exit 1
fi

write_split() {  # NAME FILE... -> $data/NAME
  local dir=$data/$1 f utt; shift
  mkdir -p "$dir"
  : > "$dir/wav.scp"; : > "$dir/text"; : > "$dir/utt2spk"
  for f in "$@"; do
    utt=${f%.wav}
    echo "$utt $corpus/$f" >> "$dir/wav.scp"
    echo "$utt $(echo "$utt" | tr '_' '\n' | sed 's/^0$/NO/; s/^1$/YES/' | paste -sd' ')" \
      >> "$dir/text"
    echo "$utt global" >> "$dir/utt2spk"
  done
  for file in wav.scp text utt2spk; do sort -o "$dir/$file" "$dir/$file"; done
  # spk2utt from utt2spk (Kaldi's utils/utt2spk_to_spk2utt.pl)
  awk '{u[$2] = u[$2] " " $1} END {for (s in u) print s u[s]}' "$dir/utt2spk" \
    | sort > "$dir/spk2utt"
  echo "$0: $dir: $(wc -l < "$dir/wav.scp") utterances," \
    "$(awk '{n += NF - 1} END {print n}' "$dir/text") words"
}

write_split train "${wavs[@]:0:num_train}"
write_split test "${wavs[@]:num_train}"

dict=$data/dict
mkdir -p "$dict"
printf 'NO n\nYES y\n' > "$dict/lexicon.txt"
printf 'n\ny\n' > "$dict/nonsilence_phones.txt"
echo sil > "$dict/silence_phones.txt"
echo sil > "$dict/optional_silence.txt"
: > "$dict/extra_questions.txt"

cut -d' ' -f2- "$data/train/text" > "$data/lm_text"
