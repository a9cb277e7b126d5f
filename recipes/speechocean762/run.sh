#!/usr/bin/env bash
# speechocean762 (5.6 h of non-native English read speech, 250 speakers, 16 kHz) from the
# repository's files to a WER: stage 0 lays them out (local/data.sh), then recipes/custom
# runs every stage on them (alignment from nothing, the GMM rungs, the BLSTM, dev-picked
# scores). Options other than --corpus go to recipes/custom/run.sh (its --stage counts
# from its own stage 0; our stage 0 runs whenever data/train_all is missing).
#
#   ./run.sh --corpus DIR [custom recipe options ...]
#
# The corpus: https://github.com/jimbozhang/speechocean762 (free for commercial and
# non-commercial use, its README says); a clone, or the files of a snapshot:
#   git --git-dir=REPO archive HEAD WAVE train test resource/lexicon.txt README.md | tar -x -C DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus=
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus) corpus=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$corpus" ] || { echo "Usage: $0 --corpus DIR [recipes/custom options]" >&2; exit 2; }
data=$here/data
if [ ! -s "$data/train_all/text" ]; then
  "$here/local/data.sh" "$corpus" "$data"
fi
exec "$here/../custom/run.sh" --train "$data/train_all" --test "$data/test" --dict "$data/dict" \
  --lm-text "$data/lm_text" --data "$data" --exp "$here/exp" --config "$here/conf/so762.conf" "${args[@]}"
