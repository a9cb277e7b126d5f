#!/usr/bin/env bash
# Everything the GPU issue must show, in one command on a lent GPU machine (see the device tool's README),
# each part under a time limit of its own so that a slow part leaves the others their time:
#   1. the GPU tests (none may skip);
#   2. the paper's model (6x512 BLSTM, proj 256, 260 -> 32,000 pdfs, bf16): the raw loop, the raw step as
#      one CUDA graph and the Trainer, for a batch sweep, with torch.profiler's table of the Trainer's steps;
#   3. with ARCHIVES (a folder holding train.h5 and dev.h5, or their .xz; scripts/gpu_pack.sh makes it),
#      the demo's model trained on the GPU by 4 learners sharing it, H-ADPSGD (groups of 2) and ADPSGD,
#      seeds $SEEDS (0 1), H-ADPSGD in bf16 and fp32: metrics and final.pt come back, to compare held-out loss with the same runs
#      on a CPU and to decode on a CPU;
#   4. gossip's step-time ratio with 4 learners sharing the GPU (scripts/bench_dist.py).
# Figures and logs go to gpu-out/; on the device machine (OUT set, which returns 8 files at most) they
# come back as one $OUT/gpu_checks.tgz, with the summary beside it.
#
#   bash scripts/gpu_checks.sh [ARCHIVES]     # from the repository root, with the package importable
set -uo pipefail
out=gpu-out
archives=${1:-}
rm -rf "$out" && mkdir -p "$out"
if [ -n "${OUT:-}" ]; then
  trap 'tar czf "$OUT/gpu_checks.tgz" "$out"; cp "$out/parts.txt" "$out/summary.txt" "$OUT/" 2>/dev/null' EXIT
fi
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
start=$SECONDS
part() { echo "=== $* (at ${SECONDS}s)" | tee -a "$out/parts.txt"; }
exec > >(tee -a "$out/summary.txt") 2>&1

part "1. device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
$py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$out/gpu.txt"

part "2. GPU tests"
timeout "${TESTS_S:-150}" $py -m pytest -q -rs -p no:cacheprovider tests/train/test_device.py \
  tests/distributed/test_gpu.py 2>&1 | tee "$out/gpu_tests.log"

part "3. the paper's model: raw loop, CUDA graph, Trainer"
timeout "${BENCH_S:-200}" $py scripts/bench_train.py --sweep "${SWEEP:-128,2048,8192}" --steps 10 --warmup 3 \
  --graph --profile --json "$out/bench_train.json" 2>&1 | grep -v INFO > "$out/bench_train.log"
grep -E "^(device|cuDNN|batch|fastest)" "$out/bench_train.log"

if [ -n "$archives" ]; then
  part "4. the demo's model trained on the GPU, 4 learners sharing it"
  for f in train dev; do
    [ -f "$archives/$f.h5" ] || xz -dc "$archives/$f.h5.xz" > "$archives/$f.h5"
  done
  # H-ADPSGD in fp32 too: the bf16 LSTM's model decoded to 20.98% against 13.89% for fp16 and the CPU
  # (one run, 2026-11-27); the pair per seed says whether that is bf16 or the runs' spread
  for seed in ${SEEDS:-0 1}; do  # two seeds: a WER difference between devices needs the runs' own spread
    for run in "h-adpsgd --group-size 2|bf16" "adpsgd|bf16" "h-adpsgd --group-size 2|fp32"; do
      strategy=${run%|*} precision=${run#*|}
      name=gpu-${strategy%% *}-$precision-seed$seed
      timeout "${TRAIN_S:-100}" $py -m asrtrain.cli.main train "$archives/train.h5" "$out/$name" \
        --valid "$archives/dev.h5" --hidden 160 --layers 3 --proj 80 --epochs 8 --batch 128 --base-batch 128 \
        --lr 0.5 --warmup-epochs 1 --seed "$seed" --strategy $strategy --precision "$precision" --nproc 4 \
        > "$out/$name.log" 2>&1
      echo "$name: exit $?"; grep "held-out" "$out/$name.log" | tail -2
      rm -rf "$out/$name/checkpoints"  # final.pt and metrics.jsonl come back; the checkpoints stay
    done
  done
fi

part "5. gossip overhead, 4 learners sharing the GPU"
timeout "${DIST_S:-110}" $py scripts/bench_dist.py --repeats 1 --json "$out/bench_dist.json" 2>&1 \
  | grep -v INFO > "$out/bench_dist.log"
tail -15 "$out/bench_dist.log"
part "done in $((SECONDS - start)) s"
