#!/usr/bin/env bash
# WER of a study run's final model (issue 23): the study corpus' graph and test speakers, the LM
# weight and insertion penalty picked on its dev speakers, decoded with lattices as the recipes do.
#
#   scripts/study_wer.sh exp/study/batch/runs/adpsgd-512-x1 [DATA]   # DATA: recipes/synth/data/study
#
# Writes RUN/decode_{dev,test}/ and prints the dev-picked test WER line.
set -euo pipefail
cd "$(dirname "$0")/.."

RUN=$1
D=${2:-recipes/synth/data/study}
ASRTRAIN=${ASRTRAIN:-.venv/bin/asrtrain}
for split in dev test; do
  $ASRTRAIN decode "$RUN/final.pt" "$D/lang/graph" "$D/archives/$split.h5" "$RUN/decode_$split" \
    --text "$D/corpus/$split/text" --nj 2 --acwt 0.1 --lmwt 4:20 --wip 0.0,0.5,1.0,1.5,2.0 --beam 13 \
    --max-active 7000 --lattices --lattice-beam 8 > "$RUN/decode_$split.log" 2>&1
done
$ASRTRAIN score --sweep "$RUN/decode_test" --pick-on "$RUN/decode_dev" > "$RUN/score.log" 2>&1
sed -n '1,2p' "$RUN/decode_test/dev_picked_wer"
