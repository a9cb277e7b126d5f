#!/usr/bin/env bash
# Transcribe new recordings with the model run.sh trained and exported (its last stage,
# exp/model: the network, graph, front end and the LM weight and insertion penalty picked on
# dev). A thin call of `asrtrain transcribe`, which also takes audio files as they come.
#
#   ./transcribe.sh --data DIR --out DIR     # DIR: a Kaldi data dir (wav.scp, utt2spk;
#                                            # segments allowed; no text needed)
# Writes OUT/text (one line per utterance: id and words) and OUT/ctm (word times and
# confidences).
set -euo pipefail
cd "$(dirname "$0")"

help_message="Usage: $0 --data DIR --out DIR [--exp exp] [--model EXP/model] [--threads 1]"
data=
out=
exp=exp
model=                # empty: $exp/model, where run.sh's export stage writes it
threads=1

. ../utils/parse_options.sh
. ../utils/path.sh

die() { echo "$0: $*" >&2; exit 2; }
[ -n "$data" ] && [ -n "$out" ] || die "--data and --out are required ($help_message)"
[ -d "$data" ] || die "--data $data: not a directory"
[ -f "$data/wav.scp" ] || die "--data $data: no wav.scp (a Kaldi data dir)"
model=${model:-$exp/model}
if [ ! -f "$model/manifest.json" ]; then
  die "$model/manifest.json not found: train and export with run.sh first (its last stage, export)"
fi
asrtrain transcribe "$model" "$data" --out "$out" --format text --format ctm --threads "$threads"
setting() { sed -n "s/^ *\"$1\": *\([^,]*\),*\$/\1/p" "$model/settings.json" | head -1; }
echo "$out/text: $(wc -l < "$out/text") utterances transcribed with $model (LM weight $(setting lmwt), penalty $(setting wip))"
