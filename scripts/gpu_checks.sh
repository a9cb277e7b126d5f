#!/usr/bin/env bash
# Everything the GPU issue must show, in one command on a lent GPU machine (see the device tool's README),
# each part under a time limit of its own so that a slow part leaves the others their time:
#   1. the GPU tests (none may skip), the Trainer's CUDA-graph step among them;
#   2. with ARCHIVES (a folder holding train.h5 and dev.h5, or their .xz; scripts/gpu_pack.sh makes it),
#      the demo's model trained on the GPU by 4 learners sharing it, H-ADPSGD (groups of 2) in bf16 and
#      in fp32 at seeds $SEEDS (0 1 2): metrics and final.pt come back, to decode on a CPU
#      (scripts/gpu_decode.sh) and decide the precision's default;
#   3. the paper's model (6x512 BLSTM, proj 256, 260 -> 32,000 pdfs, bf16): the raw loop, the raw step as
#      one CUDA graph, the Trainer (its step a CUDA graph) and the Trainer without it, for a batch sweep,
#      with torch.profiler's table of the eager Trainer's steps;
#   4. the step's variants and top kernels at batches $STEP_BATCHES (scripts/bench_gpu_step.py);
#   5. with DIST_S > 0, gossip's step-time ratio with 4 learners sharing the GPU (scripts/bench_dist.py).
# Figures and logs go to gpu-out/; on the device machine (OUT set, which returns 8 files at most) they
# come back as one $OUT/gpu_checks.tgz, with the summary beside it.
#
#   bash scripts/gpu_checks.sh [ARCHIVES]     # from the repository root, with the package importable
set -uo pipefail
out=gpu-out
archives=${1:-}
rm -rf "$out" && mkdir -p "$out"
if [ -n "${OUT:-}" ]; then
  # the models one file each (7 MB apiece: together they pass the 16 MB a returned file may have)
  trap 'for m in "$out"/gpu-*/final.pt; do [ -f "$m" ] && cp "$m" "$OUT/$(basename "$(dirname "$m")").pt"; done
        tar czf "$OUT/gpu_checks.tgz" --exclude=final.pt "$out"; cp "$out/summary.txt" "$OUT/" 2>/dev/null' EXIT
fi
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
start=$SECONDS
deadline=$((SECONDS + ${TOTAL_S:-540}))  # the whole run's limit: what is written by then comes back
# lim S CMD...: CMD under a limit of S seconds or what is left before the deadline (skipped under 10 s)
lim() {
  local left=$((deadline - SECONDS)); local t=$(($1 < left ? $1 : left))
  if [ "$t" -lt 10 ]; then echo "(skipped: ${left} s left before the deadline)"; return 124; fi
  timeout "$t" "${@:2}"
}
part() { echo "=== $* (at ${SECONDS}s)" | tee -a "$out/parts.txt"; }
exec > >(tee -a "$out/summary.txt") 2>&1

part "0. device"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
$py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$out/gpu.txt"

part "1. GPU tests"
lim "${TESTS_S:-150}" $py -m pytest -q -rs -p no:cacheprovider tests/train/test_device.py \
  tests/train/test_graph_step.py tests/train/test_augment.py tests/distributed/test_gpu.py 2>&1 | tee "$out/gpu_tests.log"

if [ -n "$archives" ]; then
  part "2. the demo's model trained on the GPU, 4 learners sharing it: bf16 and fp32"
  for f in train dev; do
    [ -f "$archives/$f.h5" ] || xz -dc "$archives/$f.h5.xz" > "$archives/$f.h5"
  done
  # the bf16 LSTM's model decoded to 20.98% against 13.89% for fp16 and the CPU (one run, 2026-11-27);
  # the pair per seed says whether that is bf16 or the runs' spread
  for seed in ${SEEDS:-0 1 2}; do  # seeds: a WER difference between precisions needs the runs' own spread
    for run in "h-adpsgd --group-size 2|bf16" "h-adpsgd --group-size 2|fp32"; do
      strategy=${run%|*} precision=${run#*|}
      name=gpu-${strategy%% *}-$precision-seed$seed
      lim "${TRAIN_S:-60}" $py -m asrtrain.cli.main train "$archives/train.h5" "$out/$name" \
        --valid "$archives/dev.h5" --hidden 160 --layers 3 --proj 80 --epochs 8 --batch 128 --base-batch 128 \
        --lr 0.5 --warmup-epochs 1 --seed "$seed" --strategy $strategy --precision "$precision" --nproc 4 \
        > "$out/$name.log" 2>&1
      echo "$name: exit $?"; grep "held-out" "$out/$name.log" | tail -2
      rm -rf "$out/$name/checkpoints"  # final.pt and metrics.jsonl come back; the checkpoints stay
    done
  done
fi

part "3. the paper's model: raw loop, CUDA graph, Trainer with and without its graph"
lim "${BENCH_S:-200}" $py scripts/bench_train.py --sweep "${SWEEP:-128,1024,8192}" --steps 10 --warmup 3 \
  --graph --profile --json "$out/bench_train.json" 2>&1 | grep -v INFO > "$out/bench_train.log"
grep -E "^(device|cuDNN|batch|fastest)" "$out/bench_train.log"

part "4. the step's variants and top kernels"
for b in ${STEP_BATCHES:-8192 16384}; do
  lim "${STEP_S:-45}" $py scripts/bench_gpu_step.py --batch "$b" --steps 5 --variants "${STEP_VARIANTS:-bf16-loss,bf16-weights}" \
    --json "$out/gpu_step_$b.json" 2>&1 | grep -v -e INFO -e Warning -e _VF.lstm > "$out/gpu_step_$b.log"
  grep -E "frames/s|failed" "$out/gpu_step_$b.log"
done

if [ "${DIST_S:-0}" -gt 0 ]; then
  part "5. gossip overhead, 4 learners sharing the GPU"
  lim "$DIST_S" $py scripts/bench_dist.py --repeats 1 --json "$out/bench_dist.json" 2>&1 \
    | grep -v INFO > "$out/bench_dist.log"
  tail -15 "$out/bench_dist.log"
fi
part "done in $((SECONDS - start)) s"
