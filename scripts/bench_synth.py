"""Speed of ``prepare synth``: real-time factor and hours of audio per minute.

Two figures, because the machine is shared:
- per core, from CPU time: one process renders utterances (synthesis, alignment,
  resampling, optional noise, FLAC); audio seconds / CPU seconds. Load on other
  cores does not change it much.
- end to end, from wall time: ``make_corpus`` with ``--nj`` workers, everything
  included (text loading, planning, process start-up, ali/ctm/lexicon writing).
  This one drops when other processes share the cores: the load average is printed.

    .venv/bin/python scripts/bench_synth.py [--minutes 10] [--nj 2] [--noise]

Target (issue 3): at least 300x real time on 2 cores without noise.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path


def per_core(minutes: float, noise: bool, workdir: Path) -> tuple[float, float]:
    """(audio seconds, CPU seconds) of rendering about ``minutes`` of audio in this process."""
    import numpy as np

    from asrtrain.synth import espeak
    from asrtrain.synth.corpus import SynthConfig, _job, _shards
    from asrtrain.synth.plan import make_plan
    from asrtrain.synth.render import render_shard
    from asrtrain.synth.speakers import draw_speakers, variant_genders
    from asrtrain.synth.text import load_sentences

    config = SynthConfig(hours=minutes / 60, speakers=6, noise_snr=(5.0, 25.0) if noise else None)
    sentences, _ = load_sentences()
    rng = np.random.default_rng(1)
    speakers = draw_speakers(6, rng, variant_genders(espeak.engine().data_path()))
    plan = make_plan(sentences, speakers, config.hours, 1, 1, rng, config.noise_snr, 0.0)
    shards = _shards([_job(u, workdir, config) for u in plan.utterances])
    start = time.process_time()
    audio = 0.0
    for shard in shards:
        audio += sum(r.num_samples for r in render_shard(shard)) / config.sample_rate
    return audio, time.process_time() - start


def end_to_end(minutes: float, nj: int, noise: bool, workdir: Path) -> tuple[float, float]:
    """(audio seconds, wall seconds) of a whole ``make_corpus`` run."""
    from asrtrain.synth.corpus import SynthConfig, make_corpus

    config = SynthConfig(hours=minutes / 60, speakers=max(8, nj * 4), seed=2, nj=nj,
                         noise_snr=(5.0, 25.0) if noise else None, lm_sentences=0)
    start = time.perf_counter()
    summary = make_corpus(workdir / "corpus", config)
    return sum(summary.seconds.values()), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="Audio of the end-to-end run.")
    parser.add_argument("--core-minutes", type=float, default=3.0, help="Audio of the per-core run.")
    parser.add_argument("--nj", type=int, default=2)
    parser.add_argument("--noise", action="store_true", help="Add noise (5-25 dB SNR).")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    label = "with noise" if args.noise else "without noise"
    with tempfile.TemporaryDirectory(prefix="bench_synth.") as tmp:
        audio, cpu = per_core(args.core_minutes, args.noise, Path(tmp))
        rtf_core = audio / cpu
        print(f"per core ({label}): {audio:.0f} s of audio in {cpu:.2f} CPU s = {rtf_core:.0f}x "
              f"real time; x{args.nj} cores = {rtf_core * args.nj:.0f}x "
              f"({rtf_core * args.nj / 60:.2f} h of audio per minute)")
        load = os.getloadavg()[0]
        audio, wall = end_to_end(args.minutes, args.nj, args.noise, Path(tmp))
        rtf = audio / wall
        print(f"end to end, --nj {args.nj} ({label}): {audio / 60:.1f} min of audio in {wall:.1f} s "
              f"wall = {rtf:.0f}x real time ({rtf / 60:.2f} h per minute); load average before "
              f"the run {load:.1f} on {os.cpu_count()} cores")
        print(f"ratio to the 300x target: per-core x{args.nj} {rtf_core * args.nj / 300:.2f}, "
              f"end to end {rtf / 300:.2f}")


if __name__ == "__main__":
    main()
