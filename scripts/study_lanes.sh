#!/usr/bin/env bash
# Issue 23's batch study (docs/study/PLAN.md) as two lanes of one core each, resumable across
# sessions whose workspace starts empty: the corpus and exp/ are not kept, so the finished runs'
# records are saved in docs/study/5h-<lane>/runs.tar.xz (committed) and restored before a lane runs;
# the study then skips them as finished (a record whose spec differs is refused, naming the field).
#
#   scripts/study_lanes.sh corpus     # the 5 h study corpus (about 15 minutes of both cores)
#   scripts/study_lanes.sh a          # range tests, then SSGD and ADPSGD at 512, rates x1 and x2
#   scripts/study_lanes.sh b          # the baseline's rate grid, then both at 512, rates x0.5 and x4
#   scripts/study_lanes.sh a256       # then: SSGD and ADPSGD at 256 (a256 ssgd / b256: the two strategies
#   scripts/study_lanes.sh b256       #   as two lanes, ADPSGD's in an OUT of its own); a128, b128 likewise
#   scripts/study_lanes.sh h512       # H-ADPSGD over 16 in groups of 4 at 512, rates x1 and x2 (its own OUT and report)
#   scripts/study_lanes.sh n512       # ADPSGD at 512, x1 and x2, without the global average (its own OUT and report)
#   scripts/study_lanes.sh report     # the batch study's report over every finished run (lanes stopped)
#   scripts/study_lanes.sh save       # every finished run's record into docs/study/5h-*/runs.tar.xz
#
# Every batch run is one (strategy, batch, rate) named alike in every OUT: each lane trains its
# share (`study batch --runs GLOB`) in an OUT of its own (one writer an OUT), and `report` copies
# the finished runs into one, where the whole grid then trains nothing more. a256 waits for lane
# b's baseline records and copies them (same spec, so they count as its own).
set -euo pipefail
cd "$(dirname "$0")/.."

ASRTRAIN=${ASRTRAIN:-.venv/bin/asrtrain}
S=recipes/synth/data/study/archives
M=(--base-batch 16 --lr 0.0625 --hidden 64 --layers 2 --proj 32 --threads 1)
R=(--batch 512 --start 0.25 --factor 2 --every 20 --rungs 12 --clips 5,0 --seeds 0,1,2 --sharpness-every 20)
B=(--learners 16 --rate-multipliers 0.5,1,2,4 --epochs 8 --warmup-epochs 3)
GRIDS=(batch-a batch-256 batch-256b batch-128 batch-128b)  # lanes whose runs the report gathers in batch
LANES=(range-probe batch "${GRIDS[@]}" batch-512h batch-512n)

restore() {  # docs/study/5h-$1/runs.tar.xz: runs/NAME -> exp/study/$1/runs/NAME, where not there already
  local tarball=docs/study/5h-$1/runs.tar.xz dest=exp/study/$1/runs src
  [ -f "$tarball" ] || return 0
  src=$(mktemp -d); tar -xJf "$tarball" -C "$src"
  mkdir -p "$dest"
  for run in "$src"/runs/*/; do
    name=$(basename "$run")
    [ -f "$dest/$name/record.json" ] || { rm -rf "${dest:?}/$name"; cp -r "$run" "$dest/$name"; }
  done
  rm -rf "$src"
}

pack() {  # docs/study/5h-$1/runs/ -> its runs.tar.xz (the archive's earlier runs kept)
  local dir=docs/study/5h-$1
  [ -d "$dir/runs" ] || return 0
  if [ -f "$dir/runs.tar.xz" ]; then tar -xJf "$dir/runs.tar.xz" -C "$dir" --skip-old-files; fi
  tar -C "$dir" --sort=name --owner=0 --group=0 --numeric-owner -cJf "$dir/runs.tar.xz.tmp" runs
  mv "$dir/runs.tar.xz.tmp" "$dir/runs.tar.xz"
  rm -rf "${dir:?}/runs"
}

copied() {  # run $2 in lane $1 is a copy: a baseline in another lane, or another lane's run in b's (report's) OUT
  if [ "$1" = batch ]; then
    for other in "${GRIDS[@]}"; do [ -f "exp/study/$other/runs/$2/record.json" ] && return 0; done
    return 1
  fi
  [[ "$1" == batch-* && "$2" == ssgd-16-* ]]
}

save() {  # finished runs only (record.json), without weights: a few kB each; each run once, in its own lane
  for lane in "${LANES[@]}"; do
    [ -d "exp/study/$lane/runs" ] || continue
    for run in exp/study/"$lane"/runs/*/; do
      [ -f "$run/record.json" ] || continue
      copied "$lane" "$(basename "$run")" && continue
      dest=docs/study/5h-$lane/runs/$(basename "$run")
      mkdir -p "$dest"
      find "$run" -maxdepth 1 -type f -name '*.json' -exec cp {} "$dest/" \;
      # the step rows thinned to every 10th (a baseline run logs 3,800; the plots need the shape)
      awk '!/"kind": "step"/ || (n++ % 10 == 0)' "$run/metrics.jsonl" > "$dest/metrics.jsonl"
    done
    for f in exp/study/"$lane"/*.{json,md,png}; do  # the study's own report, once it has one
      [ -f "$f" ] && [ "$(basename "$f")" != fingerprint.json ] && mkdir -p "docs/study/5h-$lane" && \
        cp "$f" "docs/study/5h-$lane/"
    done
    pack "$lane"
  done
  return 0
}

copy_runs() {  # finished runs of $1 matching $3 into $2 (where not there already)
  mkdir -p "$2/runs"
  for run in "$1"/runs/$3/; do
    [ -f "$run/record.json" ] && [ ! -e "$2/runs/$(basename "$run")" ] && cp -r "$run" "$2/runs/"
  done
  return 0
}

baseline_from_b() {  # wait for lane b's four baseline records, then copy them into exp/study/$1
  restore batch
  until [ "$(ls exp/study/batch/runs/ssgd-16-*/record.json 2>/dev/null | wc -l)" -ge 4 ]; do sleep 60; done
  copy_runs exp/study/batch "exp/study/$1" 'ssgd-16-*'
}

case "${1:-}" in
  corpus)
    [ -f "$S/train.h5" ] && { echo "$S/train.h5 exists"; exit 0; }
    cd recipes/synth
    PATH=$PWD/../../.venv/bin:$PATH bash run.sh --config conf/demo.conf --data data/study --exp exp/study \
      --hours 5 --speakers 48 --stop-stage 4 ;;
  a)  # the range tests, then both strategies at 512 at the rule's rate and twice it (where SSGD may stop)
    for lane in range-probe batch-a; do restore "$lane"; done
    $ASRTRAIN study lr-range "$S/train.h5" "$S/dev.h5" exp/study/range-probe --learners 16 "${R[@]}" "${M[@]}"
    save
    # Not run without the global average: an epoch is 149 steps at batch 512, and every run of
    # the ladder above blew up by step 100 (rate 8 is its fifth rung), before any epoch's end, so
    # the run without it is the same run (the first four seen identical, to the last digit).
    for runs in '*-512-x1' '*-512-x2'; do
      $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" exp/study/batch-a --batches 512 --strategies ssgd,adpsgd \
        --runs "$runs" "${B[@]}" "${M[@]}"
      save
    done ;;
  a256|b256|a128|b128)  # aN [ssgd]: the whole grid at N (or SSGD's share) in batch-N; bN: ADPSGD's in batch-Nb
    batch=${1:1} out=batch-${1:1} runs='*'
    [ "${1:0:1}" = b ] && out=batch-${batch}b runs="adpsgd-$batch-*"
    [ "${2:-}" = ssgd ] && runs='ssgd-*'
    restore "$out"
    baseline_from_b "$out"
    $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" "exp/study/$out" --batches "$batch" --strategies ssgd,adpsgd \
      --runs "$runs" "${B[@]}" "${M[@]}"
    save ;;
  h512|n512)  # beside the grid, each with the baseline's records copied in and a report of its own
    out=batch-512${1:0:1}
    opts=(--strategies h-adpsgd --group 4 --runs 'h-adpsgd-512-x[12]')
    [ "$1" = n512 ] && opts=(--strategies adpsgd --no-global-average --runs 'adpsgd-512-x[12]')
    restore "$out"
    baseline_from_b "$out"
    $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" "exp/study/$out" --batches 512 "${opts[@]}" "${B[@]}" "${M[@]}"
    save ;;
  b)  # the baseline's rate grid, then both strategies at 512 at the grid's ends
    restore batch
    for runs in 'ssgd-16-*' '*-512-x0.5' '*-512-x4'; do
      $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" exp/study/batch --batches 512 --strategies ssgd,adpsgd \
        --runs "$runs" "${B[@]}" "${M[@]}"
      save
    done ;;
  report)  # every finished batch run in one OUT, reported (partial while runs are missing); trains nothing
    restore batch
    for lane in "${GRIDS[@]}"; do restore "$lane"; copy_runs "exp/study/$lane" exp/study/batch '*'; done
    batches=$(ls -d exp/study/batch/runs/*/ | sed -E 's#.*/[a-z-]+-([0-9]+)-x[^/]*/$#\1#' | grep -vx 16 |
              sort -nu | paste -sd,)  # every batch some run was trained at, but the base
    done_run=$(basename "$(dirname "$(ls exp/study/batch/runs/*/record.json | head -1)")")
    $ASRTRAIN study batch "$S/train.h5" "$S/dev.h5" exp/study/batch --batches $batches \
      --strategies ssgd,adpsgd --runs "$done_run" "${B[@]}" "${M[@]}"
    save ;;
  save) save ;;
  *) echo "usage: $0 corpus|a|b|a256 [ssgd]|b256|a128 [ssgd]|b128|h512|n512|report|save" >&2; exit 2 ;;
esac
