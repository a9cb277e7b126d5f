#!/usr/bin/env python
"""Variants of the paper's training step on a GPU, side by side: where its time could go instead.

The raw step of ``scripts/bench_train.py`` (bf16 autocast, the loss over fp32 logits, fused
SGD) beside the same step with one thing changed at a time:

- ``fp16``: autocast to float16 instead of bfloat16 (timing only: fp16 training needs a
  loss scaler, which this step lacks);
- ``bf16-loss``: the cross-entropy taken on the bf16 logits, without their fp32 copy;
- ``bf16-weights``: the model's weights themselves in bf16, no autocast (what cuDNN runs
  when nothing is cast at each step);

and, for each, the dtype the LSTM's output has under it and the GPU kernels that take most
of its time (torch.profiler), so that the README can say which path cuDNN took.

    python scripts/bench_gpu_step.py --batch 4096 --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asrtrain.data.loader import IGNORE_INDEX  # noqa: E402
from asrtrain.model.blstm import BLSTM, ModelConfig  # noqa: E402

VARIANTS = ("bf16", "fp16", "bf16-loss", "bf16-weights")


def make_step(variant: str, cfg: ModelConfig, batch: int, device: torch.device) -> tuple[Callable[[], None], str]:
    """The step of ``variant`` and the dtype of the LSTM's output under it."""
    torch.manual_seed(0)
    model = BLSTM(cfg).to(device)
    if variant == "bf16-weights":
        model = model.to(torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=device.type == "cuda" or None)
    x = torch.randn(batch, 21, cfg.input_dim, device=device)
    if variant == "bf16-weights":
        x = x.to(torch.bfloat16)
    y = torch.randint(0, cfg.num_pdfs, (batch, 21), device=device)
    cast = {"fp16": torch.float16, "bf16": torch.bfloat16, "bf16-loss": torch.bfloat16}.get(variant)
    seen: list[str] = []
    model.lstm.register_forward_hook(lambda _m, _i, out: seen.append(str(out[0].dtype)) if not seen else None)

    def step() -> None:
        with torch.autocast(device_type=device.type, dtype=cast or torch.float32, enabled=cast is not None):
            logits = model(x)
        flat = logits.reshape(-1, logits.shape[-1])
        if variant not in ("bf16-loss", "bf16-weights"):
            flat = flat.float()
        loss = F.cross_entropy(flat, y.reshape(-1), ignore_index=IGNORE_INDEX)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    step()
    return step, seen[0]


def timed(step: Callable[[], None], steps: int, device: torch.device) -> float:
    """Seconds per step, device synced at both ends."""
    for _ in range(2):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return (time.perf_counter() - t0) / steps


def top_kernels(step: Callable[[], None], device: torch.device, n: int) -> list[tuple[str, float]]:
    """The ``n`` kernels (or CPU ops) with most self time over two steps: (name, ms per step)."""
    acts = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts) as prof:
        step()
        step()
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    rows = [(e.key, getattr(e, attr) / 2e3) for e in prof.key_averages() if not e.key.startswith("Command Buffer")]
    return sorted(rows, key=lambda r: -r[1])[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=4096, help="chunks of 21 frames")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--proj", type=int, default=256)
    ap.add_argument("--num-pdfs", type=int, default=32000)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    device = torch.device(args.device)
    cfg = ModelConfig(input_dim=260, hidden=args.hidden, layers=args.layers, proj=args.proj, num_pdfs=args.num_pdfs)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device {name}; model {cfg.layers}x{cfg.hidden} proj {cfg.proj} -> {cfg.num_pdfs}; batch {args.batch}")
    rows = []
    base = None
    for variant in args.variants.split(","):
        try:
            step, lstm_dtype = make_step(variant, cfg, args.batch, device)
            sec = timed(step, args.steps, device)
            kernels = top_kernels(step, device, 8)
        except Exception as exc:  # noqa: BLE001 -- a variant this device cannot run is reported, not fatal
            print(f"{variant:13s}: failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
            continue
        fps = args.batch * 21 / sec
        base = base or fps
        rows.append({"variant": variant, "frames_per_s": round(fps), "step_ms": round(1e3 * sec, 2),
                     "lstm_output_dtype": lstm_dtype, "top_kernels_ms": [(k, round(ms, 2)) for k, ms in kernels]})
        print(f"{variant:13s}: {fps:12,.0f} frames/s ({fps / base:.3f} of the first)  {1e3 * sec:8.2f} ms/step  "
              f"LSTM output {lstm_dtype}")
        for k, ms in kernels:
            print(f"      {ms:9.2f} ms/step  {k[:110]}")
        del step
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if args.json:
        args.json.write_text(json.dumps({"device": name, "batch": args.batch, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
