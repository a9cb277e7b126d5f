#!/usr/bin/env bash
# Decode on this CPU every model that scripts/gpu_checks.sh trained on the GPU (or any experiment dirs
# given), with the demo's graph and decoding settings, and print each one's test WER at the LM weight
# and penalty picked on the dev speakers. Run from the repository root after the demo's stage 4.
#
#   scripts/gpu_decode.sh /work/.device/N/gpu-out/gpu-*/     # each dir holding a final.pt
set -euo pipefail
cd "$(dirname "$0")/.."
d=recipes/synth/data
asr=${ASRTRAIN:-.venv/bin/asrtrain}
for m in "$@"; do
  m=${m%/}
  [ -f "$m/final.pt" ] || { echo "$m/final.pt: missing" >&2; exit 1; }
  for split in dev test; do
    [ -f "$m/decode_$split/decode_stats.json" ] && continue  # written last: a finished decode
    $asr decode "$m/final.pt" $d/lang/graph $d/archives/$split.h5 "$m/decode_$split" --text $d/corpus/$split/text \
      --nj 2 --acwt 0.1 --lmwt 4,6,8,10,12 --wip 0.0,0.5,1.0 --beam 13 --max-active 7000 --lattices \
      --lattice-beam 8 > "$m/decode_$split.log" 2>&1
  done
  $asr score --sweep "$m/decode_test" --pick-on "$m/decode_dev" > /dev/null
  echo "$m: $(head -1 "$m/decode_test/dev_picked_wer")"
done
