"""Acoustic features of a Kaldi data dir: log-mel filterbanks or MFCCs, with deltas.

Features come from ``kaldi-native-fbank`` (Kaldi's own algorithms, 25 ms windows,
10 ms shift, ``snip_edges``), so frame counts and values match Kaldi's
``compute-fbank-feats``/``compute-mfcc-feats``. Dither is Kaldi's Gaussian noise of
``dither`` int16 units, but drawn from a seed made of the utterance id, so the
same data dir always gives the same features whatever the number of jobs.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

FEATURE_TYPES = ("logmel", "mfcc")


@dataclass(frozen=True)
class FeatureConfig:
    """How to compute one stream of features (the Kaldi option names, in spirit)."""

    type: str = "logmel"
    num_bins: int = 40
    num_ceps: int = 13
    deltas: bool = False
    delta_order: int = 2
    delta_window: int = 2
    dither: float = 1.0
    sample_rate: int = 16000
    frame_length_ms: float = 25.0
    frame_shift_ms: float = 10.0
    low_freq: float = 20.0
    high_freq: float = 0.0

    def __post_init__(self) -> None:
        if self.type not in FEATURE_TYPES:
            raise ValueError(f"feature type {self.type!r}: expected one of {FEATURE_TYPES}")
        if self.type == "mfcc" and self.num_ceps > self.num_bins:
            raise ValueError(f"num_ceps {self.num_ceps} exceeds num_bins {self.num_bins}")

    @property
    def base_dim(self) -> int:
        """Dimension before deltas."""
        return self.num_bins if self.type == "logmel" else self.num_ceps

    @property
    def dim(self) -> int:
        """Dimension of the output (with Δ and ΔΔ: three times the base)."""
        return self.base_dim * (self.delta_order + 1 if self.deltas else 1)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def num_frames(num_samples: int, cfg: FeatureConfig) -> int:
    """Kaldi's frame count with snip_edges: ``1 + (n - window) // shift`` (0 if too short)."""
    window = int(cfg.sample_rate * cfg.frame_length_ms / 1000)
    shift = int(cfg.sample_rate * cfg.frame_shift_ms / 1000)
    return 0 if num_samples < window else 1 + (num_samples - window) // shift


def _frame_options(opts: object, cfg: FeatureConfig) -> None:
    frame = opts.frame_opts  # type: ignore[attr-defined]
    frame.samp_freq = float(cfg.sample_rate)
    frame.frame_length_ms = cfg.frame_length_ms
    frame.frame_shift_ms = cfg.frame_shift_ms
    frame.dither = 0.0  # applied by us, seeded (see dither_seed)
    frame.snip_edges = True
    mel = opts.mel_opts  # type: ignore[attr-defined]
    mel.num_bins = cfg.num_bins
    mel.low_freq = cfg.low_freq
    mel.high_freq = cfg.high_freq


def dither_seed(utt_id: str) -> int:
    """A seed that depends on the utterance only (not on the job it lands in)."""
    return zlib.crc32(utt_id.encode("utf-8"))


def compute_features(samples: np.ndarray, cfg: FeatureConfig, seed: int = 0) -> np.ndarray:
    """Features [T, dim] float32 of int16-scaled ``samples`` (T may be 0 if too short)."""
    import kaldi_native_fbank as knf

    wave = np.asarray(samples, dtype=np.float32)
    if cfg.dither > 0:
        rng = np.random.default_rng(seed)
        wave = wave + rng.standard_normal(wave.shape[0], dtype=np.float32) * np.float32(cfg.dither)
    if cfg.type == "logmel":
        opts = knf.FbankOptions()
        _frame_options(opts, cfg)
        extractor = knf.OnlineFbank(opts)
    else:
        opts = knf.MfccOptions()
        _frame_options(opts, cfg)
        opts.num_ceps = cfg.num_ceps
        extractor = knf.OnlineMfcc(opts)
    extractor.accept_waveform(float(cfg.sample_rate), wave)
    extractor.input_finished()
    count = extractor.num_frames_ready
    if count == 0:
        return np.zeros((0, cfg.dim), dtype=np.float32)
    feats = np.array([extractor.get_frame(i) for i in range(count)], dtype=np.float32)
    if cfg.deltas:
        feats = add_deltas(feats, cfg.delta_order, cfg.delta_window)
    return feats


def delta_scales(order: int, window: int) -> list[np.ndarray]:
    """Kaldi's DeltaFeatures filters: order 0 is [1]; each order convolves a regression window."""
    scales = [np.ones(1)]
    normalizer = float(sum(j * j for j in range(-window, window + 1)))
    for _ in range(order):
        prev = scales[-1]
        cur = np.zeros(prev.size + 2 * window)
        for j in range(-window, window + 1):
            cur[j + window: j + window + prev.size] += j * prev
        scales.append(cur / normalizer)
    return scales


def add_deltas(feats: np.ndarray, order: int = 2, window: int = 2) -> np.ndarray:
    """Append Δ (and ΔΔ …) as Kaldi's ``add-deltas``: edge frames repeat at both ends."""
    feats = np.asarray(feats, dtype=np.float32)
    frames, dim = feats.shape
    scales = delta_scales(order, window)
    out = np.empty((frames, dim * (order + 1)), dtype=np.float32)
    out[:, :dim] = feats
    if frames == 0:
        return out
    for i in range(1, order + 1):
        filt = scales[i]
        half = (filt.size - 1) // 2
        padded = np.concatenate([np.repeat(feats[:1], half, axis=0), feats,
                                 np.repeat(feats[-1:], half, axis=0)]).astype(np.float64)
        acc = np.zeros((frames, dim), dtype=np.float64)
        for k, weight in enumerate(filt):
            if weight != 0.0:
                acc += weight * padded[k: k + frames]
        out[:, i * dim:(i + 1) * dim] = acc
    return out


# --- a whole data dir, in parallel jobs --------------------------------------------------

#: Data-dir files copied to the output (filtered to the utterances that got features).
COPIED_UTT_TABLES = ("text", "utt2spk", "utt2dur", "segments", "utt2lang", "utt2uniq")
COPIED_WHOLE = ("wav.scp", "spk2gender", "reco2file_and_channel")
#: Files that are not keyed tables (an STM repeats its file keys, a GLM has ``*`` header
#: lines): copied byte for byte.
COPIED_VERBATIM = ("stm", "glm")


@dataclass
class JobResult:
    """What one job wrote: scp lines, frame counts, per-utterance CMVN stats, skips."""

    scp: dict[str, str]
    frames: dict[str, int]
    stats: dict[str, np.ndarray]
    skipped: dict[str, str]


def _segments(path: Path) -> dict[str, tuple[str, float, float]]:
    """Kaldi ``segments`` (``utt recording start end``, seconds; end -1 means to the end),
    checked as every step checks them: a span that is not one is an error naming its line."""
    from asrtrain.data.segments import read_segments

    return {utt: (s.recording, s.start, s.end) for utt, s in read_segments(path).items()}


def run_job(ark_path: str, items: list[tuple[str, str]], cfg: FeatureConfig, scp_name: str,
            segments: dict[str, tuple[str, float, float]] | None = None,
            durations: dict[str, float] | None = None, report: Any = None) -> JobResult:
    """Compute features of ``items`` (utt, wav.scp entry) into one ark, written atomically.

    With ``segments``, the entry is the recording's, cut to the segment's time span.
    Utterances are skipped, and returned with the reason, when they are too short for
    one frame, their audio is cut off, their segment lies past the end of the
    recording, or their audio disagrees with ``durations`` (``utt2dur``). A write
    error (a full disk) names the ark.
    """
    import kaldiio

    from asrtrain.core.atomic import atomic_open
    from asrtrain.data.cmvn import accumulate

    result = JobResult({}, {}, {}, {})
    audio = _Audio(cfg.sample_rate, scp_name)
    try:
        with atomic_open(ark_path, "wb") as fd:
            for utt, entry in items:
                if report is not None:
                    report(1)  # the parent's progress bar
                samples, reason = audio.samples(utt, entry, None if segments is None else segments[utt])
                if reason is None and durations is not None and utt in durations:
                    reason = _duration_mismatch(samples.shape[0] / cfg.sample_rate, durations[utt])
                feats = compute_features(samples, cfg, dither_seed(utt)) if reason is None else None
                if feats is not None and feats.shape[0] == 0:
                    reason = f"{samples.shape[0]} samples, shorter than one {cfg.frame_length_ms:g} ms frame"
                if reason is not None or feats is None:
                    result.skipped[utt] = reason or "no frames"
                    continue
                position = fd.tell() + len((utt + " ").encode("utf-8"))
                kaldiio.save_ark(fd, {utt: feats})
                result.scp[utt] = f"{ark_path}:{position}"
                result.frames[utt] = int(feats.shape[0])
                result.stats[utt] = accumulate(feats)
    except OSError as exc:
        if exc.filename is None:  # kaldiio writes to a descriptor: the error does not say where
            raise OSError(exc.errno, exc.strerror, ark_path) from None
        raise
    return result


#: Kaldi's extract-segments --max-overshoot: a segment may end this far past its recording.
MAX_OVERSHOOT_S = 0.5
#: utt2dur is written with limited precision: differences up to this are not a mismatch.
DURATION_TOLERANCE_S = 0.05


class _Audio:
    """Reads each utterance's samples: whole files, or segments of recordings (the last one cached)."""

    def __init__(self, sample_rate: int, scp_name: str) -> None:
        self.rate, self.scp_name = sample_rate, scp_name
        self._cache: tuple[str, np.ndarray] | None = None

    def samples(self, utt: str, entry: str, segment: tuple[str, float, float] | None
                ) -> tuple[np.ndarray, str | None]:
        """(samples, None), or (empty, the reason to skip the utterance)."""
        from asrtrain.data.audio import Truncated, read_audio

        try:
            if segment is None:
                return read_audio(entry, self.rate, self.scp_name), None
            reco, start, end = segment
            if self._cache is None or self._cache[0] != reco:
                self._cache = (reco, read_audio(entry, self.rate, self.scp_name))
        except Truncated as exc:
            return np.zeros(0, np.float32), str(exc).split(": ", 1)[-1]
        recording = self._cache[1]
        length = recording.shape[0] / self.rate
        if start >= length:
            return recording[:0], f"segment starts at {start:g} s, after the end of recording {reco} ({length:g} s)"
        if end >= 0 and end > length + MAX_OVERSHOOT_S:
            return recording[:0], (f"segment ends at {end:g} s, {end - length:.2f} s past the end of recording "
                                   f"{reco} ({length:g} s; at most {MAX_OVERSHOOT_S:g} s is cut off)")
        last = recording.shape[0] if end < 0 else min(int(round(end * self.rate)), recording.shape[0])
        return recording[int(round(start * self.rate)):last], None


def _duration_mismatch(seconds: float, declared: float) -> str | None:
    if abs(seconds - declared) <= DURATION_TOLERANCE_S:
        return None
    return f"the audio lasts {seconds:.3f} s, utt2dur says {declared:.3f} s"


def split_even(items: list, parts: int) -> list[list]:
    """Contiguous, nearly equal parts (Kaldi's split_scp.pl), none empty."""
    parts = max(1, min(parts, len(items)))
    bounds = np.linspace(0, len(items), parts + 1).round().astype(int)
    return [items[bounds[i]:bounds[i + 1]] for i in range(parts)]


def make_features(data_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str],
                  cfg: FeatureConfig, nj: int = 1) -> dict:
    """Compute ``feats.scp``, ``cmvn.scp`` and ``utt2num_frames`` of DATA into OUT.

    OUT becomes a complete Kaldi data dir: DATA's tables are copied (filtered to
    the utterances that got features), arks live in ``OUT/data/``. ``feats.scp`` is
    written last, so a directory with it is complete. Returns a summary.
    """
    import logging

    from asrtrain.core.errors import InputError
    from asrtrain.data.kaldi_dir import read_scp, read_utt2spk, validate_data_dir

    log = logging.getLogger("asrtrain.features")
    data, out = Path(data_dir), Path(out_dir).resolve()
    if not (data / "wav.scp").is_file():
        raise InputError("missing wav.scp (features are computed from audio)", data)
    segments = _segments(data / "segments") if (data / "segments").is_file() else None
    if segments is None:  # the validator expects wav.scp keyed by utterance
        validate_data_dir(data, require=("wav.scp",))
    utt2spk = read_utt2spk(data / "utt2spk")
    wav = read_scp(data / "wav.scp")
    items = []
    for utt in utt2spk:
        key = segments[utt][0] if segments is not None and utt in segments else utt
        if segments is not None and utt not in segments:
            raise InputError(f"utterance {utt!r} has no segment", data / "segments")
        if key not in wav:
            raise InputError(f"no audio for {key!r}", data / "wav.scp")
        items.append((utt, wav[key]))
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "feats.scp").unlink(missing_ok=True)  # until this run completes, OUT is not done
    name = f"raw_{cfg.type}_{data.resolve().name}"
    jobs = split_even(items, nj)
    arks = [str(out / "data" / f"{name}.{j + 1}.ark") for j in range(len(jobs))]
    durations = _utt2dur(data / "utt2dur") if (data / "utt2dur").is_file() else None
    results = _run_jobs(arks, jobs, cfg, str(data / "wav.scp"), segments, durations)
    merged = JobResult({}, {}, {}, {})
    for r in results:
        for field in ("scp", "frames", "stats", "skipped"):
            getattr(merged, field).update(getattr(r, field))
    for utt, reason in merged.skipped.items():
        log.warning("skipped %s: %s", utt, reason)
    if not merged.scp:
        raise InputError("no utterance gave any feature frame", data / "wav.scp")
    _write_outputs(data, out, name, utt2spk, merged, segments is not None)
    summary = {"utterances": len(merged.scp), "frames": int(sum(merged.frames.values())),
               "skipped": dict(merged.skipped), "dim": cfg.dim, "jobs": len(jobs)}
    log.info("features of %d utterances (%d frames, dim %d) in %s; %d skipped", len(merged.scp),
             summary["frames"], cfg.dim, out, len(merged.skipped))
    return summary


def _utt2dur(path: Path) -> dict[str, float]:
    """``utt2dur`` as seconds; a value that is not a number is an error naming the line's utterance."""
    from asrtrain.core.errors import InputError
    from asrtrain.data.kaldi_dir import read_table

    out = {}
    for utt, value in read_table(path).items():
        try:
            out[utt] = float(value)
        except ValueError:
            raise InputError(f"utterance {utt!r}: duration {value!r} is not a number", path) from None
    return out


def _run_jobs(arks: list[str], jobs: list[list], cfg: FeatureConfig, scp_name: str,
              segments: dict | None, durations: dict[str, float] | None = None) -> list[JobResult]:
    """Run the jobs inline (one) or in worker processes (several, spawned: fork-safe)."""
    from asrtrain.core.progress import Progress
    from asrtrain.core.workers import run_workers

    with Progress("features", total=sum(len(j) for j in jobs), unit=" utts") as bar:
        if len(jobs) == 1:
            results = [run_job(arks[0], jobs[0], cfg, scp_name, segments, durations)]
            bar.advance(len(jobs[0]))
            return results
        args = [(ark, job, cfg, scp_name, None if segments is None else {u: segments[u] for u, _ in job},
                 None if durations is None else {u: durations[u] for u, _ in job if u in durations})
                for ark, job in zip(arks, jobs, strict=True)]
        return run_workers(run_job, args, len(jobs), on_message=lambda _job, n: bar.advance(n))


def _write_outputs(data: Path, out: Path, name: str, utt2spk: dict[str, str],
                   merged: JobResult, has_segments: bool) -> None:
    """CMVN stats per speaker, the copied tables, utt2num_frames; feats.scp last."""
    import kaldiio

    from asrtrain.core.atomic import atomic_open, write_text
    from asrtrain.core.textio import read_text
    from asrtrain.data.cmvn import combine
    from asrtrain.data.kaldi_dir import read_table, spk2utt_from_utt2spk, write_table

    kept = {u: s for u, s in utt2spk.items() if u in merged.scp}
    spk2utt = spk2utt_from_utt2spk(kept)
    cmvn_ark = out / "data" / f"cmvn_{name[4:]}.ark"
    cmvn_scp: dict[str, str] = {}
    with atomic_open(cmvn_ark, "wb") as fd:
        for spk, utts in spk2utt.items():
            position = fd.tell() + len((spk + " ").encode("utf-8"))
            kaldiio.save_ark(fd, {spk: combine([merged.stats[u] for u in utts])})
            cmvn_scp[spk] = f"{cmvn_ark}:{position}"
    for table in COPIED_UTT_TABLES:
        if (data / table).is_file() and table != "utt2spk":
            rows = read_table(data / table, allow_empty_value=(table == "text"))
            write_table(out / table, {u: v for u, v in rows.items() if u in kept})
    for table in COPIED_WHOLE:
        if (data / table).is_file():
            rows = read_table(data / table)
            if table == "spk2gender":
                rows = {s: g for s, g in rows.items() if s in spk2utt}
            if table == "wav.scp" and not has_segments:
                rows = {u: v for u, v in rows.items() if u in kept}
            write_table(out / table, rows)
    for name in COPIED_VERBATIM:
        if (data / name).is_file():
            write_text(out / name, read_text(data / name))
    write_table(out / "utt2spk", kept)
    write_table(out / "spk2utt", spk2utt)
    write_table(out / "cmvn.scp", cmvn_scp)
    write_table(out / "utt2num_frames", {u: str(n) for u, n in merged.frames.items()})
    if merged.skipped:
        write_table(out / "skipped_utts", merged.skipped)
    elif (out / "skipped_utts").exists():
        (out / "skipped_utts").unlink()
    write_table(out / "feats.scp", merged.scp)
