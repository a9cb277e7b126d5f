"""``prepare synth``: plan, render in a process pool, write the corpus, all or nothing.

The corpus is built in a temporary sibling of OUT and renamed when complete, so a
failed or killed run leaves no directory that looks like a corpus. Files inside
already name their final paths (wav.scp and ali.scp hold absolute paths under OUT).
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import kaldiio
import numpy as np

from asrtrain.core.atomic import atomic_path, write_text
from asrtrain.core.errors import AsrtrainError, ConfigError
from asrtrain.core.progress import Progress
from asrtrain.core.textio import read_text
from asrtrain.data.kaldi_dir import spk2utt_from_utt2spk, validate_data_dir, write_table
from asrtrain.synth import espeak
from asrtrain.synth.align import ctm_lines, frame_labels, speech_phones
from asrtrain.synth.lexicon import (
    build_lexicon,
    count_variants,
    isolated_pronunciations,
    write_dict_dir,
)
from asrtrain.synth.phones import fold, phone_ids
from asrtrain.synth.plan import SPLITS, Plan, Utterance, lm_sentences, make_plan
from asrtrain.synth.render import Job, Rendered, render_shard
from asrtrain.synth.speakers import BASE_VOICES, draw_speakers, variant_genders
from asrtrain.synth.text import SOURCES, Sentence, load_sentences

log = logging.getLogger("asrtrain.synth.corpus")
SAMPLE_RATES = (16000, 8000)
#: Utterances per shard: the unit of work of a fresh worker process.
SHARD_SIZE = 64
REQUIRED = ("text", "wav.scp", "utt2dur", "spk2gender", "ali.scp")


@dataclass(frozen=True)
class SynthConfig:
    """The options of ``prepare synth``."""

    hours: float
    speakers: int
    seed: int = 0
    sample_rate: int = 16000
    noise_snr: tuple[float, float] | None = None
    reverb: float = 0.0
    dev_speakers: int = 1
    test_speakers: int = 1
    nj: int = 2
    lm_sentences: int = 0
    max_repeats: int = 1
    voices: tuple[str, ...] = BASE_VOICES
    sources: tuple[str, ...] = tuple(SOURCES)
    cache: Path | None = None

    def check(self) -> None:
        """Reject option values that cannot make a corpus, before any work."""
        if not self.hours > 0:
            raise ConfigError(f"--hours must be positive, got {self.hours}")
        if self.sample_rate not in SAMPLE_RATES:
            raise ConfigError(f"--sample-rate must be one of {SAMPLE_RATES}, got {self.sample_rate}")
        if not 0.0 <= self.reverb <= 1.0:
            raise ConfigError(f"--reverb is a probability in [0, 1], got {self.reverb}")
        if self.noise_snr is not None and self.noise_snr[0] > self.noise_snr[1]:
            raise ConfigError(f"--noise-snr LO:HI needs LO <= HI, got {self.noise_snr}")
        if self.nj < 1:
            raise ConfigError(f"--nj must be at least 1, got {self.nj}")
        if self.lm_sentences < 0:
            raise ConfigError(f"--lm-sentences must be >= 0 (0: all), got {self.lm_sentences}")
        if self.dev_speakers < 1 or self.test_speakers < 1:
            raise ConfigError("--dev-speakers and --test-speakers must be at least 1 (the "
                              f"corpus has train, dev and test), got {self.dev_speakers} and "
                              f"{self.test_speakers}")
        if self.speakers < 1:
            raise ConfigError(f"--speakers must be at least 1, got {self.speakers}")


@dataclass
class Summary:
    """What was made, for the log and the fingerprint."""

    seconds: dict[str, float] = field(default_factory=dict)
    utterances: dict[str, int] = field(default_factory=dict)
    speakers: dict[str, int] = field(default_factory=dict)
    lexicon_words: int = 0
    lexicon_variants: int = 0
    words_without_phones: list[str] = field(default_factory=list)
    text_kept: dict[str, int] = field(default_factory=dict)
    text_dropped: dict[str, int] = field(default_factory=dict)


def parse_snr(text: str | None) -> tuple[float, float] | None:
    """``LO:HI`` in dB (or one number for a fixed SNR)."""
    if text is None or text == "":
        return None
    parts = text.split(":")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise ConfigError(f"--noise-snr must be LO:HI in dB, got {text!r}") from None
    if len(values) == 1:
        values *= 2
    if len(values) != 2:
        raise ConfigError(f"--noise-snr must be LO:HI in dB, got {text!r}")
    return values[0], values[1]


def check_writable(out: Path) -> None:
    """Fail early, in one line, when OUT cannot be made or would clobber something else."""
    if out.exists() and not out.is_dir():
        raise AsrtrainError("exists and is not a directory", out)
    if out.is_dir() and any(out.iterdir()) and not (out / "phones.txt").is_file():
        raise AsrtrainError("exists, is not empty and is not a corpus; refusing to replace it",
                            out)
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise AsrtrainError(f"cannot create the corpus: {parent} is not a directory", out)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise AsrtrainError(f"cannot create the corpus: {parent} is not writable", out)


#: A sentence whose phonemes show whether a voice speaks with the phone map's symbols.
VOICE_PROBE = ("the quick brown fox jumps over the lazy dog, while five wizards hire a jury. "
               "go home now, near the car, bath and cloth, cure her, thin button.")


def check_voice(engine: espeak.Espeak, voice: str) -> None:
    """The voice exists and its phonemes are all in the phone map (British voices are not)."""
    if "+" in voice:
        raise ConfigError(f"voice {voice!r}: give base voices (en-us, en-us-nyc); the variants "
                          "(+f3, +Alex, ...) are drawn per speaker")
    engine.set_voice(voice)
    try:
        for name, _ in engine.synthesize(VOICE_PROBE).phonemes:
            fold(name)
    except AsrtrainError as exc:
        raise ConfigError(f"voice {voice!r} cannot be used: {exc}") from None


def make_corpus(out: Path, config: SynthConfig, params: dict[str, Any] | None = None) -> Summary:
    """Build the corpus at ``out``, all or nothing; ``params`` go to the run's config file.

    ``out/{train,dev,test}/`` (Kaldi data dirs with ali.scp/ali.ark and phone.ctm,
    FLAC under ``flac/``), ``phones.txt``, ``dict/``, ``lm_text``, ``speakers.tsv``,
    ``summary.json``, ``fingerprint.json`` and ``log/``. Checks that fail fast
    (options, OUT, libespeak-ng, voices, enough text) run before anything is written.
    """
    from asrtrain.core.lock import hold
    from asrtrain.core.runlog import command_run

    config.check()
    out = Path(os.path.abspath(out))
    check_writable(out)
    engine = espeak.engine()  # fails here, first, when libespeak-ng is missing
    for voice in config.voices:
        check_voice(engine, voice)
    variants = variant_genders(engine.data_path())
    sentences, text_stats = load_sentences(config.sources, config.cache)
    rng = np.random.default_rng(config.seed)
    speakers = draw_speakers(config.speakers, rng, variants, config.voices)
    plan = make_plan(sentences, speakers, config.hours, config.dev_speakers,
                     config.test_speakers, rng, config.noise_snr, config.reverb,
                     config.max_repeats)
    extra = {"espeak_ng": engine.version(), "synth": {**asdict(config), "cache": None}}
    with hold(out), atomic_path(out) as tmp:  # locked until it is renamed into place
        with command_run("prepare-synth", tmp, params, extra_fingerprint=extra, lock=out):
            log.info("text: %s", text_stats.summary())
            summary = _build(tmp, out, config, plan, sentences, engine)
            summary.text_kept = dict(text_stats.kept)
            summary.text_dropped = dict(text_stats.dropped)
            write_text(tmp / "summary.json", json.dumps(asdict(summary), indent=2) + "\n")
    return summary


def _build(tmp: Path, final: Path, config: SynthConfig, plan: Plan,
           sentences: list[Sentence], engine: espeak.Espeak) -> Summary:
    log.info("plan: %d utterances, %d speakers, about %.2f hours (seed %d)",
             len(plan.utterances), sum(len(v) for v in plan.splits.values()),
             plan.estimated_seconds / 3600, config.seed)
    rendered = _render_all(plan, tmp, config)
    ids = phone_ids()
    summary = Summary()
    for split in SPLITS:
        utts = [u for u in plan.utterances if u.split == split]
        _write_split(tmp / split, final / split, utts, rendered, config.sample_rate, ids)
        validate_data_dir(tmp / split, require=REQUIRED)
        summary.utterances[split] = len(utts)
        summary.speakers[split] = len(plan.splits[split])
        summary.seconds[split] = round(sum(rendered[u.utt_id].num_samples for u in utts)
                                       / config.sample_rate, 3)
        log.info("%s: %d utterances, %d speakers, %.3f hours", split, len(utts),
                 len(plan.splits[split]), summary.seconds[split] / 3600)
    write_text(tmp / "phones.txt", "".join(f"{p} {i}\n" for p, i in ids.items()))
    lm = lm_sentences(plan, sentences, config.lm_sentences)
    write_text(tmp / "lm_text", "".join(" ".join(s.words) + "\n" for s in lm))
    spoken = [u.sentence for u in plan.utterances]
    _write_lexicon(tmp / "dict", plan, rendered, lm + spoken, engine, summary)
    _write_speakers(tmp / "speakers.tsv", plan)
    return summary


def _render_all(plan: Plan, tmp: Path, config: SynthConfig) -> dict[str, Rendered]:
    """Render every utterance: shards of one speaker's utterances, each in a fresh process.

    A shard's audio depends on nothing but its jobs (see render_shard), so the
    bytes are the same whatever ``nj`` is and whichever worker takes a shard.
    """
    shards = _shards([_job(u, tmp, config) for u in plan.utterances])
    results: dict[str, Rendered] = {}
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["asrtrain.synth.render"])
    with Progress("synthesizing", total=len(plan.utterances)) as progress, \
            context.Pool(min(config.nj, len(shards)), maxtasksperchild=1) as pool:
        for shard in pool.imap(render_shard, shards, chunksize=1):
            for result in shard:
                results[result.utt_id] = result
            progress.advance(len(shard))
    return results


def _shards(jobs: list[Job]) -> list[list[Job]]:
    """Consecutive jobs of one speaker, at most SHARD_SIZE per shard (jobs are id-sorted)."""
    shards: list[list[Job]] = []
    for job in jobs:
        speaker = job.utt_id.rsplit("-", 1)[0]
        if (not shards or len(shards[-1]) >= SHARD_SIZE
                or shards[-1][0].utt_id.rsplit("-", 1)[0] != speaker):
            shards.append([])
        shards[-1].append(job)
    return shards


def _job(u: Utterance, tmp: Path, config: SynthConfig) -> Job:
    s = u.speaker
    return Job(u.utt_id, s.voice_name, s.rate, s.pitch, s.pitch_range, u.sentence.spoken,
               _flac(tmp, u), config.sample_rate, u.seed, u.pad_start, u.pad_end, u.snr_db,
               u.rt60)


def _flac(root: Path, u: Utterance) -> Path:
    return root / u.split / "flac" / u.speaker.spk_id / f"{u.utt_id}.flac"


def _write_split(directory: Path, final: Path, utts: list[Utterance],
                 rendered: dict[str, Rendered], sample_rate: int, ids: dict[str, int]) -> None:
    """The Kaldi data dir of one split, with ali.ark/ali.scp and phone.ctm."""
    directory.mkdir(parents=True, exist_ok=True)
    utt2spk = {u.utt_id: u.speaker.spk_id for u in utts}
    write_table(directory / "utt2spk", utt2spk)
    write_table(directory / "spk2utt", spk2utt_from_utt2spk(utt2spk))
    write_table(directory / "text", {u.utt_id: list(u.sentence.words) for u in utts})
    write_table(directory / "wav.scp", {u.utt_id: str(_flac(final.parent, u)) for u in utts})
    write_table(directory / "utt2dur", {
        u.utt_id: f"{rendered[u.utt_id].num_samples / sample_rate:.4f}" for u in utts})
    write_table(directory / "spk2gender", {u.speaker.spk_id: u.speaker.gender for u in utts})
    _write_alignments(directory, final, utts, rendered, sample_rate, ids)


def _write_alignments(directory: Path, final: Path, utts: list[Utterance],
                      rendered: dict[str, Rendered], sample_rate: int,
                      ids: dict[str, int]) -> None:
    """ali.ark/ali.scp (a phone id per frame) and phone.ctm, streamed one utterance at a time.

    The scp names the ark at its final place (under OUT, after the rename).
    """
    ark, scp = directory / "ali.ark", directory / "ali.scp"
    with kaldiio.WriteHelper(f"ark,scp:{ark},{scp}") as writer, \
            open(directory / "phone.ctm", "w", encoding="utf-8") as ctm:
        for u in utts:
            result = rendered[u.utt_id]
            segments = result.segments
            writer(u.utt_id, frame_labels(segments, result.num_samples, sample_rate, ids))
            ctm.writelines(line + "\n" for line in ctm_lines(u.utt_id, segments, sample_rate))
    text = read_text(scp)
    write_text(scp, text.replace(f" {ark}:", f" {final / 'ali.ark'}:"))


def _write_lexicon(directory: Path, plan: Plan, rendered: dict[str, Rendered],
                   sentences: list[Sentence], engine: espeak.Espeak, summary: Summary) -> None:
    """Isolated forms of every word of the text, plus train's in-context variants."""
    words = {w for s in sentences for w in s.words}
    prons, empty = isolated_pronunciations(words, engine)
    if empty:
        log.warning("%d word(s) got no phones from espeak-ng and are not in the lexicon: %s",
                    len(empty), " ".join(empty[:20]))
    train = [(u.sentence.words, speech_phones(rendered[u.utt_id].segments))
             for u in plan.utterances if u.split == "train"
             and all(w in prons for w in u.sentence.words)]
    variants = count_variants(train, prons)
    lexicon = build_lexicon(prons, variants)
    write_dict_dir(directory, lexicon)
    summary.lexicon_words = len(lexicon)
    summary.lexicon_variants = sum(len(v) - 1 for v in lexicon.values())
    summary.words_without_phones = empty
    log.info("lexicon: %d words, %d in-context variants (seen >= 2 times in %d train "
             "utterances)", summary.lexicon_words, summary.lexicon_variants, len(train))


def _write_speakers(path: Path, plan: Plan) -> None:
    """One line per speaker: split, id, voice, variant, rate, pitch, range, gender."""
    counts = Counter(u.speaker.spk_id for u in plan.utterances)
    lines = ["split\tspk_id\tvoice\tvariant\trate\tpitch\tpitch_range\tgender\tutterances\n"]
    for split in SPLITS:
        for s in plan.splits[split]:
            lines.append(f"{split}\t{s.spk_id}\t{s.voice}\t{s.variant}\t{s.rate}\t{s.pitch}\t"
                         f"{s.pitch_range}\t{s.gender}\t{counts[s.spk_id]}\n")
    write_text(path, "".join(lines))
