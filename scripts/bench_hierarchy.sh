#!/usr/bin/env bash
# The hierarchy claim with real learner processes (issue 23): H-ADPSGD of N learners in groups
# of g should train like ADPSGD of N/g learners at the same total batch, since a super-learner's
# members allreduce into one gradient of their union and the super-learners gossip as ADPSGD
# learners do. The simulator has it by construction; here it is the real `asrtrain train`
# (--nproc, gloo, the gossip thread), so what could separate them (how stale the averaging is
# with real timing) is in the run.
#
#   [SEED=N] scripts/bench_hierarchy.sh [ARCHIVE_DIR [OUT]]   # default: the demo's archives, exp/hierarchy-real, seed 0
#
# Writes OUT/{adpsgd-4,h-adpsgd-8x2}/ (metrics.jsonl, logs) and OUT/hierarchy-real.png.
set -euo pipefail
cd "$(dirname "$0")/.."

A=${1:-recipes/synth/data/archives}
OUT=${2:-exp/hierarchy-real}
ASRTRAIN=${ASRTRAIN:-.venv/bin/asrtrain}
COMMON=(--valid "$A/dev.h5" --hidden 64 --layers 2 --proj 32 --epochs 6 --batch 128 --base-batch 128
        --lr 0.5 --warmup-epochs 1 --seed "${SEED:-0}" --threads 1 --select last --no-tensorboard)

$ASRTRAIN train "$A/train.h5" "$OUT/adpsgd-4" "${COMMON[@]}" --strategy adpsgd --nproc 4
$ASRTRAIN train "$A/train.h5" "$OUT/h-adpsgd-8x2" "${COMMON[@]}" --strategy h-adpsgd --nproc 8 --group-size 2
$ASRTRAIN plot "$OUT/adpsgd-4" "$OUT/h-adpsgd-8x2" -o "$OUT/hierarchy-real.png" \
  --label "ADPSGD, 4 learners of 32" --label "H-ADPSGD, 8 learners as 4 super-learners of 2x16" \
  --title "The same total batch (128), real processes"
