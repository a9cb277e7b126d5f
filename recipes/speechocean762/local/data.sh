#!/usr/bin/env bash
# speechocean762 laid out as Kaldi data dirs, a dict dir and an LM text.
#   local/data.sh CORPUS DATA
# CORPUS is the repository's files (WAVE/, train/, test/, resource/lexicon.txt), e.g.
#   git clone https://github.com/jimbozhang/speechocean762 CORPUS
# or, from a bare mirror:
#   git --git-dir=REPO archive HEAD WAVE train test resource/lexicon.txt README.md | tar -x -C CORPUS
# Writes DATA/train_all and DATA/test (wav.scp with absolute paths, text, utt2spk, spk2utt),
# DATA/dict (the corpus lexicon, stress kept, plus sil/spn) and DATA/lm_text: the training
# transcripts only. The test transcripts never reach the LM; test words the training text lacks
# (5.7% of the test tokens) are still in the lexicon and so in the graph's vocabulary.
set -euo pipefail
[ $# -eq 2 ] || { echo "Usage: $0 CORPUS DATA" >&2; exit 2; }
corpus=$(cd "$1" && pwd) data=$2
for f in train/text train/wav.scp train/utt2spk test/text test/wav.scp test/utt2spk resource/lexicon.txt; do
  [ -f "$corpus/$f" ] || { echo "$0: $corpus/$f missing (is $corpus the speechocean762 repository?)" >&2; exit 1; }
done
export LC_ALL=C
for split in train test; do
  out=$data/$split; [ "$split" = train ] && out=$data/train_all
  mkdir -p "$out"
  # the corpus' files are tab-separated; Kaldi's are space-separated, sorted
  awk -v root="$corpus" -F'\t' '{ print $1 " " root "/" $2 }' "$corpus/$split/wav.scp" | sort > "$out/wav.scp"
  missing=$(awk '{ print $2 }' "$out/wav.scp" | while read -r f; do [ -f "$f" ] || echo "$f"; done | wc -l)
  [ "$missing" -eq 0 ] || { echo "$0: $missing audio files of $corpus/$split/wav.scp missing" >&2; exit 1; }
  tr '\t' ' ' < "$corpus/$split/text" | awk '{ $1 = $1; print }' | sort > "$out/text"
  tr '\t' ' ' < "$corpus/$split/utt2spk" | awk '{ $1 = $1; print }' | sort > "$out/utt2spk"
  awk '{ s[$2] = s[$2] " " $1 } END { for (k in s) print k s[k] }' "$out/utt2spk" | sort > "$out/spk2utt"
  echo "$out: $(wc -l < "$out/wav.scp") utterances, $(wc -l < "$out/spk2utt") speakers"
done
cut -d' ' -f2- "$data/train_all/text" > "$data/lm_text"
# the dict: the corpus lexicon as it is (CMU phones with stress), tabs to spaces
mkdir -p "$data/dict"
tr '\t' ' ' < "$corpus/resource/lexicon.txt" > "$data/dict/lexicon_corpus.txt"
"$(dirname "$0")/../../librispeech/local/prepare_dict.sh" "$data/dict/lexicon_corpus.txt" "$data/dict"
oov=$(awk 'NR == FNR { lex[$1] = 1; next } { for (i = 2; i <= NF; i++) if (!($i in lex)) n++ } END { print n + 0 }' \
  "$data/dict/lexicon.txt" "$data/train_all/text" "$data/test/text")
[ "$oov" -eq 0 ] || echo "$0: warning: $oov transcript tokens are not in the lexicon" >&2
