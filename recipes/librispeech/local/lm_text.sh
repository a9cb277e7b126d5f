#!/usr/bin/env bash
# The LM training text, one sentence per line: the user's file (plain or .gz), or, without
# one, the transcripts of the training data dir.
#   local/lm_text.sh LM_TEXT|"" TRAIN_DATA_DIR OUT
set -euo pipefail
[ $# -eq 3 ] || { echo "Usage: $0 LM_TEXT|'' TRAIN_DATA_DIR OUT" >&2; exit 2; }
src=$1 train=$2 out=$3
mkdir -p "$(dirname "$out")"
if [ -z "$src" ]; then
  cut -d' ' -f2- "$train/text" > "$out.tmp"
  what="the transcripts of $train"
else
  [ -f "$src" ] || { echo "$0: no LM text $src" >&2; exit 1; }
  case "$src" in *.gz) gunzip -c "$src" ;; *) cat "$src" ;; esac > "$out.tmp"
  what=$src
fi
mv "$out.tmp" "$out"
echo "$out: $(wc -l < "$out") sentences, $(wc -w < "$out") words from $what"
