#!/usr/bin/env python
"""Training speed of the BLSTM: the raw model loop beside asrtrain's Trainer, at the same model and batch.

For each batch of the sweep, side by side in one run:

- **raw**: forward + backward + clipping + SGD on tensors already on the device (the
  model alone: no loader, no bookkeeping), timed with a device sync at the end;
- **trainer**: ``Trainer.fit`` (single learner) on an archive of random chunks of the
  model's shape written by the real writer: the loader, the copy to the device, the
  step, the figures, progress and metrics, timed between steps by a hook.

With ``--archive PATH`` the trainer side is ``asrtrain train`` itself, a process of its own
on that archive for ``--epochs`` epochs (the path a user's run takes: process setup,
the real archive's reads and padding, checksums, progress, TensorBoard, the epochs' ends),
and its figure is the median epoch's frames/s from ``metrics.jsonl``, as the run reports
it; the raw loop runs at the same model, batch and threads before each repeat.

It prints frames/s of both and their ratio (the trainer's overhead; targets: at
least 0.95 on a GPU, 0.9 on a CPU), the model FLOPs utilisation on a GPU (6 FLOPs per
weight per frame, about 0.26 GFLOP for the paper's model, over the device's peak),
and the peak memory (device memory on a GPU, the process's peak RSS on a CPU).

    python scripts/bench_train.py                                   # the paper's model
    python scripts/bench_train.py --hidden 160 --layers 3 --proj 80 --num-pdfs 299 --sweep 128
    python scripts/bench_train.py --device cuda --sweep 128,512,2048,8192
    python scripts/bench_train.py --archive recipes/synth/data/archives/train.h5 --hidden 96 \
        --layers 2 --proj 64 --sweep 96 --threads 2 --epochs 3 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from asrtrain.model.blstm import BLSTM, ModelConfig  # noqa: E402
from asrtrain.train.hooks import Hooks  # noqa: E402
from asrtrain.train.step import autocast, frame_loss  # noqa: E402

# Dense peak TFLOP/s by device-name substring: (bf16/fp16 tensor, fp32 without TF32)
PEAKS = {"H200": (989.0, 67.0), "H100": (989.0, 67.0), "A100": (312.0, 19.5),
         "V100": (125.0, 15.7), "L40S": (362.0, 91.6), "A10": (125.0, 31.2), "T4": (65.0, 8.1)}


def peak_tflops(name: str, precision: str) -> float | None:
    for key, (half, single) in PEAKS.items():
        if key in name:
            return half if precision == "bf16" else single
    return None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def raw_step(cfg: ModelConfig, batch: int, device: torch.device, dtype: torch.dtype | None,
             capturable: bool = False) -> tuple[Any, Any]:
    """(the step the Trainer runs, on tensors already on the device; its optimizer).

    ``capturable``: the step leaves the gradients to the caller and keeps no autocast
    weight-cast cache, which cannot live across CUDA-graph replays.
    """
    torch.manual_seed(0)
    model = BLSTM(cfg).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=device.type == "cuda" or None)
    x = torch.randn(batch, 21, cfg.input_dim, device=device)
    y = torch.randint(0, cfg.num_pdfs, (batch, 21), device=device)

    def step() -> None:
        with autocast(device, dtype, cache=not capturable):
            logits = model(x)
        loss_sum, _, _ = frame_loss(logits, y)
        if not capturable:
            opt.zero_grad(set_to_none=True)
        (loss_sum / y.numel()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()

    return step, opt


def raw_loop(cfg: ModelConfig, batch: int, steps: int, warmup: int, device: torch.device,
             dtype: torch.dtype | None) -> float:
    """Frames/s of the model alone: the step the Trainer runs, on tensors already on the device."""
    step, _ = raw_step(cfg, batch, device, dtype)
    for _ in range(warmup):
        step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return batch * 21 * steps / (time.perf_counter() - t0)


def graph_loop(cfg: ModelConfig, batch: int, steps: int, warmup: int, device: torch.device,
               dtype: torch.dtype | None) -> float | str:
    """Frames/s of the raw step captured once as a CUDA graph and replayed: what the step would gain
    with no kernel-launch gaps. The error's first line where capture fails (cuDNN's RNN may refuse)."""
    step, opt = raw_step(cfg, batch, device, dtype, capturable=True)
    try:
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture requires
            for _ in range(max(warmup, 3)):
                opt.zero_grad(set_to_none=True)
                step()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            step()
        graph.replay()
        sync(device)
        t0 = time.perf_counter()
        for _ in range(steps):
            graph.replay()
        sync(device)
    except Exception as exc:  # noqa: BLE001 -- reported as the probe's result
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return batch * 21 * steps / (time.perf_counter() - t0)


class StepClock(Hooks):
    """Times the Trainer's steady state: from the end of step ``warmup`` to the end of step ``last``.

    With ``profile`` it also runs torch.profiler over those steps and keeps the table.
    """

    def __init__(self, warmup: int, last: int, device: torch.device, profile: bool = False) -> None:
        self.warmup, self.last, self.device = warmup, last, device
        self.t0 = self.t1 = 0.0
        self.steps = 0
        self.profiler: Any = None
        self.table = ""
        if profile:
            acts = [torch.profiler.ProfilerActivity.CPU]
            if device.type == "cuda":
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            self.profiler = torch.profiler.profile(activities=acts)

    def after_step(self, trainer: Any, x: Any, y: Any, lr: float) -> None:
        self.steps += 1
        if self.steps in (self.warmup, self.last):
            sync(self.device)
            if self.steps == self.warmup:
                self.t0 = time.perf_counter()
                if self.profiler is not None:
                    self.profiler.start()
            else:
                self.t1 = time.perf_counter()
                if self.profiler is not None:
                    self.profiler.stop()
                    key = "self_cuda_time_total" if self.device.type == "cuda" else "self_cpu_time_total"
                    self.table = self.profiler.key_averages().table(sort_by=key, row_limit=20)


def trainer_loop(cfg: ModelConfig, batch: int, steps: int, warmup: int, device: torch.device,
                 precision: str, root: Path, threads: int | None, profile: bool = False,
                 cuda_graph: bool = True) -> float:
    """Frames/s of ``Trainer.fit`` (single learner) at the same model and batch; on a GPU with
    ``cuda_graph`` its step replayed as a CUDA graph (the default), timed after the capture."""
    from asrtrain.data.synthetic import write_random_archive
    from asrtrain.train.config import TrainConfig
    from asrtrain.train.graph_step import WARMUP_STEPS
    from asrtrain.train.trainer import train

    if cuda_graph and device.type == "cuda":
        warmup = max(warmup, WARMUP_STEPS + 2)  # the eager warm-up and the capture stay untimed

    archive = write_random_archive(root / f"b{batch}.h5", batch * (steps + warmup), cfg.input_dim, cfg.num_pdfs)
    tcfg = TrainConfig(archive=archive, exp=root / f"exp{batch}", epochs=1, batch=batch, base_batch=batch,
                       lr=0.01, warmup_epochs=0, model=cfg, log_every=50, resume=False, precision=precision,
                       num_threads=threads, block_chunks=max(1024, batch), max_steps_per_epoch=steps + warmup,
                       cuda_graph=cuda_graph, tensorboard=False)
    clock = StepClock(warmup, steps + warmup, device, profile)
    train(tcfg, hooks=clock)
    archive.unlink()
    if clock.table:
        print(f"torch.profiler, Trainer steps {warmup + 1}-{steps + warmup} at batch {batch}:\n{clock.table}")
    return batch * 21 * steps / (clock.t1 - clock.t0)


def cli_loop(cfg: ModelConfig, batch: int, archive: Path, epochs: int, threads: int | None,
             root: Path, precision: str) -> tuple[float, float]:
    """``asrtrain train`` on ``archive``: (median epoch frames/s as reported, in real frames; the
    same in chunk slots, padding included, as the raw loop counts them)."""
    import subprocess

    from asrtrain.data.shards import open_archive
    from asrtrain.train.metrics import epoch_rows

    exp = root / f"cli{batch}"
    cmd = [str(Path(sys.executable).with_name("asrtrain")), "train", str(archive), str(exp),
           "--hidden", str(cfg.hidden), "--layers", str(cfg.layers), "--proj", str(cfg.proj),
           "--batch", str(batch), "--base-batch", str(batch), "--epochs", str(epochs),
           "--warmup-epochs", "0", "--lr", "0.1", "--no-resume", "--precision", precision]
    if threads:
        cmd += ["--threads", str(threads)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    fps = statistics.median(r["frames_per_s"] for r in epoch_rows(exp / "metrics.jsonl"))
    a = open_archive(archive)
    real = a.num_frames / (a.num_chunks * a.chunk)
    return fps, fps / real


def peak_memory_gb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2 ** 30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20  # KiB on Linux


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input-dim", type=int, default=260)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--proj", type=int, default=256)
    ap.add_argument("--num-pdfs", type=int, default=32000)
    ap.add_argument("--sweep", default="128", help="comma-separated batches in 21-frame chunks")
    ap.add_argument("--steps", type=int, default=None,
                    help="timed steps per measurement [10; with --archive an epoch's steps at each batch, so "
                         "the raw loop is timed over the span the run's epochs are: 10 steps (0.7 s) swung "
                         "the ratio by 0.7-1.4 on these cores]")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--repeats", type=int, default=1, help="raw and trainer alternately, the median kept")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default=None, help="default: bf16 on GPU, fp32 on CPU")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the device's peak")
    ap.add_argument("--profile", action="store_true",
                    help="print torch.profiler's table of the Trainer's steps (with --graph on a GPU: of its eager steps)")
    ap.add_argument("--graph", action="store_true",
                    help="on a GPU, also time the raw step captured as one CUDA graph (launch gaps removed) "
                         "and the Trainer without its own graph (--no-cuda-graph)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--archive", type=Path, default=None,
                    help="time `asrtrain train` on this archive instead of the Trainer on random chunks "
                         "(the model's input and output sizes are the archive's)")
    ap.add_argument("--epochs", type=int, default=3, help="with --archive: epochs of each run")
    args = ap.parse_args()
    if args.archive is not None:
        from asrtrain.data.shards import open_archive

        a = open_archive(args.archive)
        args.input_dim, args.num_pdfs = a.feat_dim, a.num_pdfs

    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    dtype = torch.bfloat16 if precision == "bf16" else None
    cfg = ModelConfig(input_dim=args.input_dim, hidden=args.hidden, layers=args.layers, proj=args.proj,
                      num_pdfs=args.num_pdfs)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    peak = args.peak_tflops or (peak_tflops(name, precision) if device.type == "cuda" else None)
    flops = cfg.train_flops_per_frame()
    print(f"device {name}; model {cfg.layers}x{cfg.hidden} BLSTM proj {cfg.proj} {cfg.input_dim}->{cfg.num_pdfs} "
          f"({cfg.num_parameters() / 1e6:.2f}M parameters, {flops / 1e9:.4f} GFLOP/frame); {precision}; "
          f"load average {os.getloadavg()[0]:.2f}")
    if device.type == "cuda":
        print(f"cuDNN {torch.backends.cudnn.version()}, torch {torch.__version__}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        for batch in [int(b) for b in args.sweep.split(",")]:
            raws, trainers = [], []
            padded = []
            steps = args.steps or (-(-a.num_chunks // batch) if args.archive is not None else 10)
            for _ in range(args.repeats):
                raws.append(raw_loop(cfg, batch, steps, args.warmup, device, dtype))
                if args.archive is not None:
                    real, slots = cli_loop(cfg, batch, args.archive, args.epochs, args.threads, Path(tmp),
                                           args.precision or "auto")
                    trainers.append(real)
                    padded.append(slots)
                    continue
                both = args.graph and device.type == "cuda"  # then the profile is of the eager Trainer
                trainers.append(trainer_loop(cfg, batch, steps, args.warmup, device, args.precision or "auto",
                                             Path(tmp), args.threads, profile=args.profile and not trainers and not both))
            raw, trn = statistics.median(raws), statistics.median(trainers)
            row = {"batch": batch, "raw_fps": round(raw), "trainer_fps": round(trn), "ratio": round(trn / raw, 3),
                   "ratios": [round(t / r, 3) for t, r in zip(trainers, raws, strict=True)],
                   "peak_memory_gb": round(peak_memory_gb(device), 2)}
            if args.graph and device.type == "cuda":
                graphed = graph_loop(cfg, batch, steps, args.warmup, device, dtype)
                row["graph_fps"] = round(graphed) if isinstance(graphed, float) else graphed
                print(f"batch {batch:6d}: raw step as one CUDA graph: "
                      + (f"{graphed:12,.0f} frames/s ({graphed / raw:.3f} of the raw loop)"
                         if isinstance(graphed, float) else f"capture failed ({graphed})"))
                eager = trainer_loop(cfg, batch, steps, args.warmup, device, args.precision or "auto", Path(tmp),
                                     args.threads, profile=args.profile, cuda_graph=False)
                row["trainer_eager_fps"] = round(eager)
                print(f"batch {batch:6d}: the Trainer without its CUDA graph (--no-cuda-graph): "
                      f"{eager:12,.0f} frames/s ({eager / raw:.3f} of the raw loop)")
            if padded:
                row["cli_padded_ratio"] = round(statistics.median(padded) / raw, 3)
                print(f"batch {batch:6d}: asrtrain train counting padding as the raw loop does: "
                      f"{row['cli_padded_ratio']:.3f} of the raw loop")
            if peak:
                row["mfu_raw"] = round(raw * flops / (peak * 1e12), 4)
                row["mfu_trainer"] = round(trn * flops / (peak * 1e12), 4)
            rows.append(row)
            mfu = f"  MFU {100 * row['mfu_trainer']:.1f}% (raw {100 * row['mfu_raw']:.1f}%)" if peak else ""
            print(f"batch {batch:6d}: raw {raw:12,.0f} frames/s  trainer {trn:12,.0f} frames/s  "
                  f"trainer/raw {trn / raw:.3f} (per repeat {row['ratios']})  peak memory "
                  f"{row['peak_memory_gb']:.2f} GB{mfu}")
    best = max(rows, key=lambda r: r["trainer_fps"])
    print(f"fastest: batch {best['batch']}, {best['trainer_fps']:,} frames/s through the Trainer "
          f"({best['trainer_fps'] / 15.8e3:.1f}x the paper's V100; a 2000 h epoch in "
          f"{720e6 / best['trainer_fps'] / 3600:.2f} h)")
    if args.json:
        args.json.write_text(json.dumps({"device": name, "precision": precision, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
