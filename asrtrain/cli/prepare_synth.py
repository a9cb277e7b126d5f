"""``asrtrain prepare synth``: a multi-speaker corpus with exact phone alignments."""

from __future__ import annotations

from pathlib import Path

import click

from asrtrain.cli.options import config_option, resolved_params


@click.command()
@config_option
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--hours", type=float, required=True, help="Hours of audio (all splits).")
@click.option("--speakers", type=int, required=True, help="Number of speakers (all splits).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seed of text, speakers, splits and audio: same seed, same corpus.")
@click.option("--sample-rate", type=click.Choice(["16000", "8000"]), default="16000",
              show_default=True, help="Sample rate of the FLAC files.")
@click.option("--noise-snr", type=str, default=None, metavar="LO:HI",
              help="Add coloured noise at an SNR drawn from LO..HI dB per utterance.")
@click.option("--reverb", type=float, default=0.0, show_default=True,
              help="Probability that an utterance is reverberated (synthetic room, RT60 0.2-0.8 s).")
@click.option("--dev-speakers", type=int, default=1, show_default=True,
              help="Speakers held out for dev (their sentences are not in train or lm_text).")
@click.option("--test-speakers", type=int, default=1, show_default=True,
              help="Speakers held out for test.")
@click.option("--voices", type=str, default="en-us,en-us-nyc", show_default=True,
              help="espeak-ng base voices, comma-separated.")
@click.option("--lm-sentences", type=int, default=0, show_default=True,
              help="Limit lm_text to the train sentences plus this many unused ones (0: all "
                   "sentences not in dev/test; small limits keep test LMs and graphs small).")
@click.option("--max-repeats", type=int, default=1, show_default=True,
              help="Times a train sentence may be said (by different train speakers), for "
                   "more hours than the ~87 h of distinct sentences; dev/test never repeat.")
@click.option("--nj", type=int, default=2, show_default=True, help="Parallel jobs.")
@click.pass_context
def synth(ctx: click.Context, out: Path, hours: float, speakers: int, seed: int,
          sample_rate: str, noise_snr: str | None, reverb: float, dev_speakers: int,
          test_speakers: int, voices: str, lm_sentences: int, max_repeats: int, nj: int, config: str | None) -> None:
    """Speak public-domain text (World English Bible, fortunes, Devil's Dictionary; fetched
    once from Debian) with espeak-ng voices into OUT/{train,dev,test} Kaldi data dirs, with
    per-frame phone alignments (ali.scp), a phone CTM, phones.txt, dict/ and lm_text.

    Dev and test speakers and sentences are disjoint from train. The corpus is
    written to a temporary directory and renamed to OUT when complete.
    """
    from asrtrain.synth.corpus import SynthConfig, make_corpus, parse_snr

    config_ = SynthConfig(hours=hours, speakers=speakers, seed=seed,
                          sample_rate=int(sample_rate), noise_snr=parse_snr(noise_snr),
                          reverb=reverb, dev_speakers=dev_speakers, test_speakers=test_speakers,
                          nj=nj, lm_sentences=lm_sentences, max_repeats=max_repeats, voices=tuple(v.strip() for v in voices.split(",") if v.strip()))
    summary = make_corpus(out, config_, resolved_params(ctx))
    total = sum(summary.seconds.values()) / 3600
    click.echo(f"{out}: {total:.3f} hours, " + ", ".join(
        f"{split} {summary.utterances[split]} utts / {summary.speakers[split]} spk"
        for split in summary.utterances))
