#!/usr/bin/env bash
# Everything the GPU issue must show, in one command on a lent GPU machine (see the device tool's README):
# the GPU tests, the paper's model through the raw loop and the Trainer for a batch sweep (bf16),
# the gossip overhead with 4 learners sharing the GPU, and a training run whose final.pt decodes on a CPU.
# Figures and logs go to ${OUT:-gpu-out}/.
#
#   bash scripts/gpu_checks.sh            # from the repository root, with the package importable
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
$py -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version())" \
  | tee -a "$out/gpu.txt"
$py -m pytest -q tests/train/test_device.py tests/distributed/test_gpu.py 2>&1 | tee "$out/gpu_tests.log"
$py scripts/bench_train.py --sweep 128,512,2048,8192 --steps 20 --warmup 5 --repeats 2 --profile \
  --json "$out/bench_train.json" 2>&1 | grep -v INFO | tee "$out/bench_train.log"
$py scripts/bench_dist.py --repeats 3 --json "$out/bench_dist.json" 2>&1 | grep -v INFO | tee "$out/bench_dist.log"
