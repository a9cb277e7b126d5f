#!/usr/bin/env python
"""How well and how fast does an exported model transcribe a long recording?

1. **Per utterance**: the test data dir transcribed utterance by utterance (the words of
   ``asrtrain decode`` at the exported setting: tests/transcribe asserts they are equal);
   its WER against the references.
2. **Long recording**: the test utterances joined into one recording of ``--minutes``
   (cycling through them when the test set is shorter, in order), with pauses drawn from
   ``--pause`` seconds of the corpus' own noise floor between them; cut at its pauses and
   transcribed as one file; its WER against the joined references, beside the
   per-utterance WER of the same sequence of utterances, and beside that WER with one
   speaker for all utterances (what the file's adaptation can know: it is one speaker, the
   test set has several).
3. **Speed and memory**: wall and CPU seconds of the long recording over its duration
   (the real-time factor; run under ``taskset -c 0`` with ``--threads 1`` for one core)
   and the process's peak resident memory (``ru_maxrss``) after it.
4. **Calibration**: per-utterance words by confidence bin, the fraction that are right
   (aligned to an equal reference word); the headline is the bin ``confidence >= 0.9``.

Usage (a model from ``asrtrain export``, the corpus' test dir)::

    OMP_NUM_THREADS=1 taskset -c 0 .venv/bin/python scripts/bench_transcribe.py \\
        MODEL recipes/synth/data/corpus/test --minutes 10 --out /tmp/bench_transcribe
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import numpy as np

BINS = (0.0, 0.5, 0.7, 0.9, 1.0001)


def wer(ref: list[str], hyp: list[str]) -> dict[str, float]:
    import kaldialign

    errs = kaldialign.edit_distance(ref, hyp)
    return {"errors": int(errs["total"]), "words": len(ref), "ins": int(errs["ins"]),
            "del": int(errs["del"]), "sub": int(errs["sub"]),
            "wer": 100.0 * errs["total"] / max(len(ref), 1)}


def correct_flags(ref: list[str], hyp: list[str]) -> list[bool]:
    """For each hypothesis word in order: aligned to an equal reference word."""
    import kaldialign

    flags = []
    for r, h in kaldialign.align(ref, hyp, "*"):
        if h != "*":
            flags.append(r == h)
    return flags


def noise_floor(audio: list[np.ndarray]) -> float:
    """RMS of the quietest 10% of 25 ms frames over all utterances (int16 scale)."""
    from asrtrain.transcribe.segment import frame_levels

    levels = np.concatenate([frame_levels(x, 16000) for x in audio])
    return float(np.sqrt(10 ** (np.percentile(levels, 10) / 10) - 1.0))


def long_recording(data: Path, minutes: float, pause: tuple[float, float], seed: int,
                   rate: int, out: Path, edges: bool = True,
                   speaker: str | None = None) -> tuple[Path, list[str], float]:
    """The joined recording, the order of its utterances, its duration in seconds. Pauses
    are the next utterance's own leading silence tiled (``edges``), or white noise at the
    corpus' noise floor. With ``speaker``, only that speaker's utterances."""
    import soundfile

    from asrtrain.data.audio import read_audio
    from asrtrain.data.kaldi_dir import read_scp, read_utt2spk

    wav = read_scp(data / "wav.scp")
    if speaker is not None:
        spk = read_utt2spk(data / "utt2spk")
        wav = {u: v for u, v in wav.items() if spk.get(u) == speaker}
        if not wav:
            raise SystemExit(f"no utterance of speaker {speaker!r} in {data / 'utt2spk'}")
    utts = sorted(wav)
    audio = {u: read_audio(wav[u], rate) for u in utts}
    rng = np.random.default_rng(seed)
    floor = noise_floor(list(audio.values()))
    parts, order, total = [], [], 0.0
    while total < minutes * 60:
        for u in utts:
            n = int(rng.uniform(*pause) * rate)
            if edges:  # the room of the next utterance: its leading 150 ms (the corpus pads
                head = audio[u][:int(0.15 * rate)]  # 0.2-0.5 s of silence) tiled to the pause
                gap = np.resize(head, n)
            else:
                gap = rng.normal(scale=floor, size=n)
            parts += [gap, audio[u]]
            order.append(u)
            total += (gap.size + audio[u].size) / rate
            if total >= minutes * 60:
                break
    parts.append(np.resize(parts[-1][-int(0.15 * rate):], int(pause[1] * rate)) if edges
                 else rng.normal(scale=floor, size=int(pause[1] * rate)))
    x = np.clip(np.round(np.concatenate(parts)), -32768, 32767).astype(np.int16)
    path = out / "long.wav"
    soundfile.write(str(path), x, rate, "PCM_16")
    return path, order, x.size / rate


def one_speaker(data: Path, out: Path) -> Path:
    """``data`` as a data dir whose utterances all have one speaker (CMVN and fMLLR over all)."""
    import shutil

    from asrtrain.data.kaldi_dir import read_utt2spk, spk2utt_from_utt2spk, write_table

    one = out / "one_speaker"
    one.mkdir(parents=True, exist_ok=True)
    for name in ("wav.scp", "segments"):
        if (data / name).is_file():
            shutil.copyfile(data / name, one / name)
    utt2spk = {u: "one" for u in read_utt2spk(data / "utt2spk")}
    write_table(one / "utt2spk", utt2spk)
    write_table(one / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    return one


def calibration(transcripts: list, refs: dict[str, list[str]]) -> dict[str, object]:
    """Fraction right per confidence bin, over every per-utterance word."""
    confs, right = [], []
    for t in transcripts:
        flags = correct_flags(refs.get(t.id, []), [w.word for w in t.words])
        confs += [w.confidence for w in t.words]
        right += flags
    c, r = np.asarray(confs), np.asarray(right, dtype=bool)
    table = []
    for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
        sel = (c >= lo) & (c < hi)
        table.append({"bin": f"[{lo:.1f}, {min(hi, 1.0):.1f}]", "words": int(sel.sum()),
                      "right": float(r[sel].mean()) if sel.any() else None,
                      "mean_confidence": float(c[sel].mean()) if sel.any() else None})
    high = c >= 0.9
    return {"words": int(c.size), "right_overall": float(r.mean()) if r.size else None,
            "words_conf_ge_0.9": int(high.sum()),
            "right_among_conf_ge_0.9": float(r[high].mean()) if high.any() else None,
            "bins": table}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("data", type=Path, help="a Kaldi data dir with text (the test set)")
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--pause", default="0.5:1.5", help="pause lengths LO:HI seconds")
    ap.add_argument("--pause-fill", choices=["edges", "noise"], default="edges",
                    help="pauses made of each utterance's own leading silence, or of white noise "
                         "at the corpus' noise floor")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--speaker-per", choices=["file", "segment"], default="file",
                    help="adapt the long recording to the whole file or to each segment")
    ap.add_argument("--speaker", default=None,
                    help="join only this speaker's utterances (the file is then rightly one speaker)")
    ap.add_argument("--max-seconds", type=float, default=None, help="cut above this [20]")
    ap.add_argument("--out", type=Path, default=Path("/tmp/bench_transcribe"))
    args = ap.parse_args(argv)
    import torch

    from asrtrain.data.kaldi_dir import read_text
    from asrtrain.transcribe.segment import MAX_SECONDS
    from asrtrain.transcribe.transcriber import Transcriber

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    engine = Transcriber(args.model, device="cpu")
    rss_loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    refs = read_text(args.data / "text")
    lo, hi = (float(x) for x in args.pause.split(":"))
    path, order, seconds = long_recording(args.data, args.minutes, (lo, hi), args.seed,
                                          engine.settings.sample_rate, args.out,
                                          edges=args.pause_fill == "edges", speaker=args.speaker)
    t0, c0 = time.perf_counter(), time.process_time()
    long_report = engine.run([path], max_seconds=args.max_seconds or MAX_SECONDS,
                             segment_speakers=args.speaker_per == "segment")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss_long = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    (long_t,) = long_report.transcripts
    t1 = time.perf_counter()
    utt_report = engine.run([args.data])
    utt_wall = time.perf_counter() - t1
    hyps = {t.id: [w.word for w in t.words] for t in utt_report.transcripts}
    one_hyps = hyps  # one speaker's utterances: the per-utterance decode had one speaker too
    if args.speaker is None:
        one_report = engine.run([one_speaker(args.data, args.out)])
        one_hyps = {t.id: [w.word for w in t.words] for t in one_report.transcripts}
    joined_ref = [w for u in order for w in refs[u]]
    figures = {
        "model": str(args.model), "data": str(args.data), "threads": args.threads,
        "pause_fill": args.pause_fill, "speaker_per": args.speaker_per, "speaker": args.speaker,
        "per_utterance": {"utterances": len(hyps), **wer([w for u in sorted(refs) for w in refs[u]],
                                                         [w for u in sorted(refs) for w in hyps.get(u, [])]),
                          "wall_seconds": utt_wall, "rtf": utt_wall / utt_report.audio_seconds},
        "long": {"seconds": seconds, "utterances": len(order), "segments": long_t.segments,
                 **wer(joined_ref, [w.word for w in long_t.words]),
                 "per_utterance_same_sequence": wer(joined_ref, [w for u in order for w in hyps.get(u, [])]),
                 "per_utterance_one_speaker": wer(joined_ref,
                                                  [w for u in order for w in one_hyps.get(u, [])]),
                 "wall_seconds": wall, "cpu_seconds": cpu, "rtf_wall": wall / seconds,
                 "rtf_cpu": cpu / seconds},
        "peak_rss_mib": {"model_loaded": rss_loaded, "after_long": rss_long},
        "calibration": calibration(utt_report.transcripts, refs),
    }
    figures["long"]["wer_minus_per_utterance"] = (figures["long"]["wer"]
                                                  - figures["long"]["per_utterance_same_sequence"]["wer"])
    (args.out / "bench.json").write_text(json.dumps(figures, indent=2) + "\n")
    lg, pu, cal = figures["long"], figures["per_utterance"], figures["calibration"]
    print(f"per utterance: {pu['utterances']} utts, WER {pu['wer']:.2f}% [{pu['errors']}/{pu['words']}], "
          f"RTF {pu['rtf']:.3f}")
    print(f"long recording: {lg['seconds'] / 60:.1f} min, {lg['utterances']} utterances, cut into "
          f"{lg['segments']} segments: WER {lg['wer']:.2f}% vs per-utterance "
          f"{lg['per_utterance_same_sequence']['wer']:.2f}% on the same sequence "
          f"({lg['wer_minus_per_utterance']:+.2f} points); with one speaker for all, as the file "
          f"has: {lg['per_utterance_one_speaker']['wer']:.2f}% "
          f"({lg['wer'] - lg['per_utterance_one_speaker']['wer']:+.2f} points)")
    print(f"speed: RTF {lg['rtf_wall']:.3f} wall, {lg['rtf_cpu']:.3f} CPU ({args.threads} thread(s)); "
          f"peak RSS {rss_long:.0f} MiB (model loaded: {rss_loaded:.0f} MiB)")
    high = cal["right_among_conf_ge_0.9"]
    print(f"calibration: {'-' if high is None else f'{100 * high:.1f}%'} right among "
          f"{cal['words_conf_ge_0.9']} words with confidence >= 0.9 "
          f"(all words: {100 * (cal['right_overall'] or 0):.1f}% right)")
    for b in cal["bins"]:
        right = "-" if b["right"] is None else f"{100 * b['right']:.1f}%"
        print(f"  confidence {b['bin']}: {b['words']} words, {right} right")
    return 0


if __name__ == "__main__":
    sys.exit(main())
