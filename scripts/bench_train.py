#!/usr/bin/env python
"""Training speed of the BLSTM: frames per second of forward + backward + SGD update.

Random inputs and targets of the archive's shape (batch of 21-frame chunks),
so it measures the model alone, not the loader. On a GPU it also prints the
model FLOPs utilisation: FLOPs per frame (from the model config: 6 per weight,
about 0.26 GFLOP for the paper's model) times frames/s over the device's peak.

    python scripts/bench_train.py                          # the paper's model, batch 256
    python scripts/bench_train.py --hidden 128 --layers 2 --num-pdfs 2000 --batch 64
    python scripts/bench_train.py --device cuda --precision bf16 --batch 256
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from asrtrain.model.blstm import BLSTM, ModelConfig

# Dense peak TFLOP/s by device-name substring: (bf16/fp16 tensor, fp32 without TF32)
PEAKS = {"H200": (989.0, 67.0), "H100": (989.0, 67.0), "A100": (312.0, 19.5),
         "V100": (125.0, 15.7), "L40S": (362.0, 91.6), "A10": (125.0, 31.2), "T4": (65.0, 8.1)}


def peak_tflops(name: str, precision: str) -> float | None:
    for key, (half, single) in PEAKS.items():
        if key in name:
            return half if precision == "bf16" else single
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input-dim", type=int, default=260)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--proj", type=int, default=256)
    ap.add_argument("--num-pdfs", type=int, default=32000)
    ap.add_argument("--batch", type=int, default=256, help="21-frame chunks per step")
    ap.add_argument("--chunk", type=int, default=21)
    ap.add_argument("--steps", type=int, default=5, help="timed steps")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None,
                    help="default: bf16 on GPU, fp32 on CPU")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the device's peak")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    cfg = ModelConfig(input_dim=args.input_dim, hidden=args.hidden, layers=args.layers,
                      proj=args.proj, num_pdfs=args.num_pdfs)
    torch.manual_seed(0)
    model = BLSTM(cfg).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, args.chunk, cfg.input_dim, device=device)
    y = torch.randint(0, cfg.num_pdfs, (args.batch, args.chunk), device=device)
    dtype = torch.bfloat16 if precision == "bf16" else None

    def step() -> float:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.num_pdfs), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        return float(loss.detach())

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    t = time.perf_counter()
    for _ in range(args.warmup):
        step()
    sync()
    warm = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    secs = time.perf_counter() - t
    frames = args.batch * args.chunk * args.steps
    fps = frames / secs
    flops = cfg.train_flops_per_frame()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device            {name} ({torch.get_num_threads()} threads)" if device.type == "cpu"
          else f"device            {name}")
    print(f"model             {cfg.layers}x{cfg.hidden} BLSTM proj {cfg.proj} {cfg.input_dim}->"
          f"{cfg.num_pdfs}: {cfg.num_parameters() / 1e6:.2f}M parameters")
    print(f"precision         {precision}")
    print(f"batch             {args.batch} chunks x {args.chunk} frames = {args.batch * args.chunk} frames")
    print(f"warm-up           {args.warmup} step(s) in {warm:.2f} s")
    print(f"step time         {secs / args.steps:.3f} s")
    print(f"frames/s          {fps:,.0f}")
    print(f"GFLOP/frame       {flops / 1e9:.4f}")
    print(f"achieved TFLOP/s  {fps * flops / 1e12:.3f}")
    # One epoch of SWB-2000 (about 2000 h = 720M frames) at this speed, for scale.
    print(f"hours per 2000 h epoch  {720e6 / fps / 3600:,.1f}")
    if device.type == "cuda":
        peak = args.peak_tflops or peak_tflops(name, precision)
        if peak:
            print(f"peak TFLOP/s      {peak:g} ({precision})")
            print(f"MFU               {100 * fps * flops / (peak * 1e12):.1f}%")
        else:
            print("MFU               unknown peak for this device (use --peak-tflops)")


if __name__ == "__main__":
    main()
