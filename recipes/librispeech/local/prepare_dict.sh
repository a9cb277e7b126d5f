#!/usr/bin/env bash
# A Kaldi dict dir from the LibriSpeech lexicon (openslr.org/11 librispeech-lexicon.txt:
# "WORD<TAB>PH1 PH2 ..." in stressed ARPAbet, several lines for several pronunciations).
#   local/prepare_dict.sh LEXICON DICT_DIR
# Writes lexicon.txt (the lexicon plus "<UNK> spn"), silence_phones.txt (sil, spn),
# optional_silence.txt (sil), nonsilence_phones.txt (every phone of the lexicon, stress
# variants of a vowel on one line as in Kaldi's local/prepare_dict.sh) and extra_questions.txt.
set -euo pipefail
[ $# -eq 2 ] || { echo "Usage: $0 LEXICON DICT_DIR" >&2; exit 2; }
lexicon=$1 dir=$2
[ -f "$lexicon" ] || { echo "$0: no lexicon $lexicon (get librispeech-lexicon.txt from https://www.openslr.org/11)" >&2; exit 1; }
mkdir -p "$dir"
export LC_ALL=C
case "$lexicon" in *.gz) cat_lex=(gunzip -c "$lexicon") ;; *) cat_lex=(cat "$lexicon") ;; esac

# normalise whitespace, drop lines without a pronunciation
"${cat_lex[@]}" | awk 'NF > 1 { $1 = $1; print }' > "$dir/lexicon_nosil.txt"
[ -s "$dir/lexicon_nosil.txt" ] || { echo "$0: no pronunciations in $lexicon" >&2; exit 1; }
if ! awk '{ for (i = 2; i <= NF; i++) if ($i == "sil" || $i == "spn") exit 1 }' "$dir/lexicon_nosil.txt"; then
  echo "$0: $lexicon uses the silence phone sil or spn in a word" >&2; exit 1
fi
printf 'sil\nspn\n' > "$dir/silence_phones.txt"
echo sil > "$dir/optional_silence.txt"
awk '{ for (i = 2; i <= NF; i++) print $i }' "$dir/lexicon_nosil.txt" | sort -u |
  awk '{ base = $1; sub(/[0-9]+$/, "", base); if (base in line) line[base] = line[base] " " $1; else line[base] = $1 }
       END { for (b in line) print line[b] }' | sort > "$dir/nonsilence_phones.txt"
{ echo "<UNK> spn"; cat "$dir/lexicon_nosil.txt"; } | sort -u > "$dir/lexicon.txt"
# Kaldi's questions: the silence phones, then the phones of each stress level
{ echo "sil spn"
  tr ' ' '\n' < "$dir/nonsilence_phones.txt" |
    awk '{ s = "none"; if (match($1, /[0-9]+$/)) s = substr($1, RSTART); if (s in q) q[s] = q[s] " " $1; else q[s] = $1 }
         END { for (s in q) print q[s] }' | sort
} > "$dir/extra_questions.txt"
echo "$dir: $(cut -d' ' -f1 "$dir/lexicon.txt" | sort -u | wc -l) words," \
     "$(wc -l < "$dir/lexicon.txt") pronunciations, $(wc -w < "$dir/nonsilence_phones.txt") non-silence phones"
