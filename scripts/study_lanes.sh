#!/usr/bin/env bash
# Issue 23's batch study (docs/study/PLAN.md) as two lanes of one core each, resumable across
# sessions whose workspace starts empty: the corpus and exp/ are not kept, so the finished runs'
# records are saved under docs/study/5h-<lane>/runs/ (committed) and restored before a lane runs;
# the study then skips them as finished (a record whose spec differs is refused, naming the field).
#
#   scripts/study_lanes.sh corpus     # the 5 h study corpus (about 10 minutes of both cores)
#   scripts/study_lanes.sh a          # range tests (global average on, then off), then batch 256
#   scripts/study_lanes.sh b          # the baseline's rate grid, then batch 512
#   scripts/study_lanes.sh save       # copy every finished run's record into docs/study/
#
# Lane a's batch-256 study shares the baseline with lane b: it copies lane b's finished baseline
# runs first (same spec, so they count as its own), and runs any that are missing itself.
set -euo pipefail
cd "$(dirname "$0")/.."

ASRTRAIN=${ASRTRAIN:-.venv/bin/asrtrain}
S=recipes/synth/data/study/archives
M=(--base-batch 16 --lr 0.0625 --hidden 64 --layers 2 --proj 32 --threads 1)
R=(--batch 512 --start 0.25 --factor 2 --every 20 --rungs 12 --clips 5,0 --seeds 0,1,2 --sharpness-every 20)
B=(--learners 16 --rate-multipliers 0.5,1,2,4 --strategies ssgd,adpsgd --epochs 8 --warmup-epochs 3)
LANES=(range range-no-ga batch batch-256)

restore() {  # docs/study/5h-$1/runs/NAME -> exp/study/$1/runs/NAME, where not there already
  local src=docs/study/5h-$1/runs dest=exp/study/$1/runs
  [ -d "$src" ] || return 0
  mkdir -p "$dest"
  for run in "$src"/*/; do
    name=$(basename "$run")
    [ -f "$dest/$name/record.json" ] || { rm -rf "${dest:?}/$name"; cp -r "$run" "$dest/$name"; }
  done
}

save() {  # finished runs only (record.json), without weights: a few kB each
  for lane in "${LANES[@]}"; do
    [ -d "exp/study/$lane/runs" ] || continue
    for run in exp/study/"$lane"/runs/*/; do
      [ -f "$run/record.json" ] || continue
      dest=docs/study/5h-$lane/runs/$(basename "$run")
      mkdir -p "$dest"
      find "$run" -maxdepth 1 -type f \( -name '*.json' -o -name '*.jsonl' \) -exec cp {} "$dest/" \;
    done
    for f in exp/study/"$lane"/*.{json,md,png}; do  # the study's own report, once it has one
      [ -f "$f" ] && [ "$(basename "$f")" != fingerprint.json ] && mkdir -p "docs/study/5h-$lane" && \
        cp "$f" "docs/study/5h-$lane/"
    done
  done
  return 0
}

case "${1:-}" in
  corpus)
    [ -f "$S/train.h5" ] && { echo "$S/train.h5 exists"; exit 0; }
    cd recipes/synth
    PATH=$PWD/../../.venv/bin:$PATH bash run.sh --config conf/demo.conf --data data/study --exp exp/study \
      --hours 5 --speakers 48 --stop-stage 4 ;;
  a)
    for lane in range range-no-ga batch-256; do restore "$lane"; done
    $ASRTRAIN study lr-range "$S/train.h5" "$S/dev.h5" exp/study/range --learners 16 "${R[@]}" "${M[@]}"
    save
    $ASRTRAIN study lr-range "$S/train.h5" "$S/dev.h5" exp/study/range-no-ga --learners 16 "${R[@]}" "${M[@]}" \
      --no-global-average
    save
    restore batch
    mkdir -p exp/study/batch-256/runs
    for run in exp/study/batch/runs/ssgd-16-*/; do
      [ -f "$run/record.json" ] && [ ! -e "exp/study/batch-256/runs/$(basename "$run")" ] && \
        cp -r "$run" "exp/study/batch-256/runs/"
    done
    $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" exp/study/batch-256 --batches 256 "${B[@]}" "${M[@]}"
    save ;;
  b)
    restore batch
    $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" exp/study/batch --batches 512 "${B[@]}" "${M[@]}"
    save ;;
  save) save ;;
  *) echo "usage: $0 corpus|a|b|save" >&2; exit 2 ;;
esac
