"""Recipe sizes that scale with the corpus: the one rule ``recipes/custom`` follows.

A user's corpus can be three minutes (yesno) or a thousand hours, and the sizes that
suit one ruin the other: 5,000 tree leaves on 40 minutes leave a few frames per leaf, a
paper-sized BLSTM overfits in two epochs. The rule scales each size with the hours h of
training speech, anchored to what was measured or what Kaldi's recipes use:

- alignment ladder: tree leaves ≈ 1200·h^0.35 (Kaldi's mini_librispeech, 5 h, uses
  2,000-2,500; LibriSpeech 960 h 5,000-7,000) but at least ``FRAMES_PER_LEAF`` frames each
  (900, mini_librispeech's; Kaldi's RM has 760, TIMIT 450), Gaussians 6 per leaf as Kaldi's
  recipes (2,000/10,000 ... 5,000/100,000) but at least ``FRAMES_PER_GAUSSIAN`` (150) frames
  each; monophones 1,000 Gaussians (Kaldi's default) or fewer on tiny corpora. The floors
  bind below about 5 h. Measured on speechocean762's 40-minute cut (0.63 h, 70 training
  speakers; recipes/speechocean762/RESULTS.md), test WER of the SAT GMM at the dev pick
  (oracle): 1,020 leaves / 5,030 Gaussians (the floors of 100 and 45 frames before)
  86.62% (84.91), 500 / 3,000 79.44% (77.74), 250 / 3,000 74.70% (74.33), **250 / 1,500**
  73.97% (72.63); tri and LDA+MLLT alike (88.1 and 90.4% at 1,020 leaves, 82.7 and 81.0%
  at 250), all against the monophones' 78.95%: the tree's leaves split the little data
  there is (the demo's synthesized voices, which set 1,000 on 0.74 h, never showed it). On
  speechocean762's 2.7 h, test500 at the dev pick, 1,080 / 6,460 against 1,700 / 10,200:
  SAT 53.47% against 56.17%, LDA+MLLT 61.73% against 63.05%;
- the hybrid's tree ≈ 400·h^0.6 pdfs (300 on 0.74 h; ≈ 38k at 2,000 h: the papers'
  SWB-2000 softmax has 32,000);
- the BLSTM: 3×160 below 2 h (the demo), 4×320 below 20 h, 5×512 below 200 h, the papers'
  6×512 beyond. At speechocean762's 40-minute cut (with the context, dropout and
  SpecAugment, test500 at the dev pick, seeds 0 and 1) 3×160 gave 66.03% on the mean, 3×256
  66.09 at 2.1x the training time, 4×160 66.15, dropout 0.3 66.73 (thirty-first session,
  recipes/speechocean762/RESULTS.md); 12 epochs with the model picked on held-out loss (16
  beyond 200 h, the papers'); batch 128 at rate 0.5 below 20 h (the demo's), the papers' 256
  at 0.1 beyond, halved (to 16 at least) until an epoch holds 1,000 steps; the base batch
  stays at 128 (256), so the rate per chunk is the rule's at every batch (0.125 a step at
  32). Measured on speechocean762 (2.7 h, 3x192 BLSTM, logmel, two seeds, docs/results.md):
  batch 32 (1,477 steps an epoch) against 128 (370) at the same rate per chunk gave a lower
  held-out loss after every epoch (epoch 3: 3.04 and 2.86 against 3.14 and 2.98) and a lower
  dev WER at epoch 3 (best over the LM grid: 61.7 and 48.8% against 87.5 and 62.5%); the
  CPU's frames/s hardly differ. The earlier floor of 64 steps came from the synthesized
  corpus (the demo keeps its hand-set 128). The base batch had followed the batch (0.5 a
  step at 32, four times the measured rate per chunk): the 4x320 network diverged in its
  first epoch at seed 1 (held-out loss 186) and trailed at seed 0 (3.25 after epoch 2
  against the 3x192's 2.94 at 0.125);
- the rate's schedule: below 20 h Kaldi's (``plateau``: the rate kept while the held-out loss
  improves by 1%, halved after an epoch that does not), beyond the papers' fixed anneal by
  1/sqrt(2) an epoch (``paper``). Measured on speechocean762 (3x192 on SAT fMLLR + logmel,
  8 epochs, batch 32, two seeds; dev and test500 decoded with an LM that has read neither):
  dev 50.89 and 50.69% against 53.05 and 51.67%, test500 at the dev pick 52.69 and 53.28%
  against 53.79 and 53.44% (the held-out loss itself 0.01–0.03 higher); the anneal had taken
  the rate to a ninth by epoch 8 on a network still underfitting (43% held-out frame accuracy).
  With the plateau schedule, training ends at the first plateau after the third halving
  (``plateau_stop`` 3: an epoch at an eighth of the peak rate that does not improve the
  held-out loss by 1%; the best epoch is kept whatever follows it). The 40-minute cut of
  speechocean762 (recipes/custom, 12 epochs) peaked at epoch 7 and rose at every epoch after,
  at rates from 1/8 to 1/128 of the peak: the stop ends it after epoch 8 with the same model;
  both seeds of the 2.7 h runs above were still improving at their third halving;
- the model decoded (``select``): below 20 h the mean of the last 3 epochs' weights (Kaldi
  nnet3's final averaging), beyond it the epoch with the best held-out loss. Measured on
  speechocean762's 40-minute cut (3x160, the plateau schedule stopped after epoch 9, two seeds
  at each of two ladders, recipes/speechocean762/RESULTS.md): test WER at the dev pick, the
  best epoch → the average, 75.30 → 72.63 and 76.16 → 73.97% (250 leaves), 72.51 → 71.41 and
  75.91 → 75.43% (500 leaves); the best on test and dev's own best fell in all four too. Not
  measured beyond the cut (the 2.7 h runs had held-out losses still falling at their end);
- the learners, from the machine that runs the recipe (:func:`learners_for`): one learner
  (``single``) on a CPU or one GPU, synchronous SGD over the GPUs of a multi-GPU machine
  (its updates equal one learner's at the same batch, so the rates measured here carry
  over). On this project's 2-core machines, one epoch of the 40-minute speechocean762 cut's
  3x160 BLSTM at batch 16: one learner with both cores 6,097 frames/s, ADPSGD on 2 learners
  5,939, SSGD on 2 4,317, one learner on one core 3,980, H-ADPSGD on 4 learners (the
  demo's) 2,641. Beyond 2 CPU cores nothing was measured; a cluster's launcher sets its
  own ``--strategy`` and ``--nproc``;
- adaptation: UBM and fMLLR GMM of 64 Gaussians below 2 h, 256 beyond; i-vectors 100;
- LM order from the LM text's tokens: 2 below 20k, 3 below 2M, 4 beyond;
- the network's input streams: below ``ADAPT_STREAMS_HOURS`` of training speech, the SAT
  GMM's fMLLR features beside logmel (``fmllr_source`` ``sat``: train's from the aligner's
  transforms, dev's, test's and a new recording's from the speaker-independent first pass,
  Kaldi's ``decode_fmllr.sh``, the stream Kaldi's nnet recipes read), no i-vectors; beyond, the
  papers' fMLLR + i-vector + logmel with the transcript-free global fMLLR. Measured on
  speechocean762 (117 training speakers, 2.7 h; 3x192 BLSTM, 5 epochs, a fifth of the test set
  at the dev-picked setting, recipes/speechocean762/RESULTS.md): SAT fMLLR + logmel 56.74 and
  59.38% against logmel alone 61.67 and 63.93% (seeds 0 and 1), and at 8 epochs 54.32 and
  54.41% against the SAT GMM's 55.77%. Logmel alone had been the rule (the speaker streams
  as estimated before, global fMLLR and i-vectors, hurt with few speakers: the issue's digits,
  3 training speakers, 24.9% against 12.2% with logmel alone; its read speech, 74 speakers,
  10.2% against 9.8%; one seed each); the SAT stream normalises speakers rather than naming
  them. I-vectors beside it, at the rule's 4x320 on speechocean762's 2.7 h (seed 0, test500
  at the dev pick), gave 52.72% against 47.53%: the network fits the training speakers'
  i-vectors (frame accuracy 67% on train against 36% held out, 53% against 41% without).
  The SAT stream needs the ladder's SAT rung decoded (the recipe's ``gmm_rungs`` with
  lda,sat), and an exported model carries that first pass (``asrtrain transcribe``; its cost in
  docs/transcribing.md). The papers' 2,000 h used the three streams; nothing between was
  measured, so the switch sits where the rule's network grows to the papers' width;
- the network's pdfs (``hybrid_tree``, ``num_pdfs``): below 20 h a likelihood tree of
  ``NETWORK_LEAVES_PER_ALI_LEAF`` (2) leaves for each of the aligner's, grown on the SAT rung's
  realigned training frames (``questions``: ``prepare tree``, Kaldi's chain ``build_tree.sh``);
  beyond, a tree of ≈ 400·h^0.6 pdfs grown from frame counts (``counts``: ≈ 38k at 2,000 h, the
  papers' softmax has 32,000; nothing was measured there). Measured on speechocean762's 2.7 h
  (4x320, SAT fMLLR + logmel, test500 at the dev pick, seeds 0 and 1): 2,000 question leaves
  45.93 and 46.53% (the rule gives 2,160 there), the SAT rung's own 1,080 (``aligner``, Kaldi's
  nnet recipes' way) 48.85 and 48.51%, a 720-pdf count tree 51.08 and 52.06% (the SAT GMM
  53.38%): the aligner's leaves are sized for Gaussians (900 frames each), the network shares
  its parameters across pdfs. Not measured on the 40-minute cut (250 leaves, 500 for the network);
- the BLSTM's context (``context``): below 20 h each 21-frame chunk is
  given ``CONTEXT_FRAMES`` (10) frames of its neighbours in the same utterance on either side, in
  training and decoding (Kaldi's BLSTM recipes' chunk context; 1.95x the compute a chunk).
  Measured on speechocean762's 2.7 h (the rule's network and tree, test500 at the dev pick,
  seeds 0 and 1): cross-entropy 47.53 -> 45.33% and 48.70 -> 46.56% (dev 45.87 -> 44.69 and
  48.33 -> 45.96); with the recipe's LF-MMI after it 46.15 -> 44.77% and 45.49 -> 45.65%
  (oracle 45.96 -> 44.30 and 45.27 -> 44.11, dev 45.87 -> 44.49 and 46.75 -> 43.90): 11 of
  the 12 figures better. On the 40-minute cut (0.63 h, 3x160, the rule's 500-pdf question tree,
  scored on 3,183 test words where earlier cut figures had 822; recipes/speechocean762/RESULTS.md,
  twenty-eighth session), with dropout and SpecAugment beside it: 68.17 -> 65.98% and
  70.37 -> 66.07% (seeds 0 and 1; dev 72.86 -> 70.93 and 74.43 -> 71.53), the BLSTM below the
  SAT GMM's 68.61% at both seeds where it had been level with it (three seeds' mean 68.70%);
  dropout and SpecAugment without the context 68.08 and 67.23%: the context gives most of it. It
  costs the cut about 5 minutes of training a network on the 2 cores (4,500 frames/s against
  7,700). 5 frames instead of 10 there (twenty-ninth session): 66.01 and 65.57% on test500, level,
  but dev 1.0 points worse on the mean, a higher held-out loss at both seeds, the pair 0.7 worse,
  for 20% less training time; so 10. The cut as a user runs it (its own 822-word test, 4 speakers
  held out as dev) goes from the WAVs to the WER in 12 min 19 s on the 2 cores (BLSTM 69.95 and
  71.53% at seeds 0 and 1 against the SAT GMM's 76.40%). Below 0.5 h, with dropout and SpecAugment
  beside it (thirtieth session): half the cut (0.335 h, test500 at the dev pick, seeds 0, 1, 2)
  77.13, 77.22, 79.52% against the bare network's 78.51, 80.02, 79.99% (dev 83.59, 83.78, 84.44
  against 84.98, 84.92, 84.80; a lower held-out loss at each seed), the SAT GMM 78.20%; a quarter
  of it (0.167 h, seeds 0, 1) 89.16, 89.19 against 89.88, 90.51% (the SAT GMM 87.53%: every model
  near 90% there); yesno (0.1 h, seeds 0-2) 0.00% either way. So no lower bound; beyond 20 h the
  papers' bare chunks (nothing measured there, and the GPU's frames/s would halve). The earlier cut
  figures (3x160, a count tree, 822 test words: -0.4 and +2.3) were inside their noise;
- regularisation (``dropout``, ``spec_augment``): below 20 h,
  dropout 0.2 between the LSTM layers and SpecAugment's masks on the logmel stream (two bands of
  up to 8 bins, two spans of up to 5 frames a chunk). Measured on speechocean762's 2.7 h (the
  rule's network, tree and context, test500 at the dev pick, seeds 0 and 1): cross-entropy
  45.33 -> 44.99% and 46.56 -> 45.93% (dev 44.69 -> 43.31 and 45.96 -> 44.49), with the recipe's
  LF-MMI after it 44.77 -> 44.74% and 45.65 -> 44.08% (dev 44.49 -> 42.72 and 43.90 -> 43.90);
  on bare chunks 47.53 -> 45.87% and 48.70 -> 47.66%, on another ladder 45.93 -> 45.96% (seed 0).
  At 3x192 (underfitting: 43% held-out frame accuracy after 8 epochs) the same pair lost 0.6 and
  0.5 points. On the 40-minute cut they come with the context (above, measured together); alone
  there, 68.17 -> 68.08% and 70.37 -> 67.23% (dev 72.86 -> 73.10, 74.43 -> 73.52). Below 0.5 h
  with the context (above: half the cut at three seeds, a quarter at two, yesno); beyond 20 h
  nothing decides it, so it stays off there;
- sequence training (``lfmmi``): from ``LFMMI_HOURS`` (2 h) on, two epochs of lattice-free MMI
  after the cross-entropy (recipes' stage train,realign,lfmmi: ``prepare den-graph`` and
  ``train-seq``). Measured on speechocean762's 2.7 h (the rule's network and tree, test500 at the
  dev pick, seeds 0 and 1): 45.93 → 45.08% and 46.53 → 45.90%, dev 48.23 → 47.64 and 48.43 →
  47.54, small and of one sign on both seeds, both epochs, dev and test; the whole recipe from
  the WAVs on another ladder 47.53 → 46.15% and 48.70 → 45.49% (seeds 0 and 1; dev 45.87 → 45.87,
  48.33 → 46.75); on the 40-minute cut 72.87 → 72.38 and 72.14 → 72.26%, inside that cut's
  noise, so it stays off below. From random weights
  instead (chain's way, ``train-seq --from-scratch``) the 2.7 h network had 15.5% held-out frame
  accuracy after two epochs against the cross-entropy's 29.3%, at three times an epoch's cost on
  the 2 cores: the rule keeps LF-MMI after the cross-entropy;
- an ensemble (``members``): from ``ENSEMBLE_HOURS`` (2 h) to 20 h, ``ENSEMBLE_MEMBERS`` (2)
  networks trained alike from other seeds and decoded as one (``decode --ensemble``: the
  frame-level mean of their scores; ``export --ensemble`` carries them), at twice the network's
  training time. Measured on speechocean762's 2.7 h (the rule's network, context, dropout and
  LF-MMI, test500 at the dev pick): seeds 0, 1 and 2 alone 44.74, 44.08 and 44.42%, the pairs
  as one 42.92, 42.73 and 42.73% (each below both its networks, on dev too: 41.34, 40.65, 42.22
  against 42.72, 43.90, 44.88), the three 41.78%; before LF-MMI seeds 0 + 1 44.99 and 45.93 ->
  43.73%. Three networks gain a further point for half as much training again: the rule keeps two.
  Below 2 h (minutes of training; the
  40-minute cut's 15-minute budget) and beyond 20 h (hours of training a network) one network.
  On the 40-minute cut (test500 at the dev pick): without context seeds 0, 1, 2 alone 68.17,
  70.37, 67.55%, seeds 0 + 1 as one 67.73, the three 66.57; with the context, dropout and
  SpecAugment 65.98 and 66.07% alone, 64.44% as one (0.939x the SAT GMM's 68.61): about
  1.5 points for a second network's 10 minutes, which the cut's budget does not hold.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from asrtrain.core.errors import InputError
from asrtrain.core.textio import read_lines
from asrtrain.train.augment import SpecAugment

FRAMES_PER_HOUR = 360_000
#: Frames per training chunk (the papers' 21; the recipes' ``chunk``).
CHUNK_FRAMES = 21
#: Hours of training speech from which the network reads i-vectors and the global fMLLR
#: (below: the SAT first pass's fMLLR and logmel).
ADAPT_STREAMS_HOURS = 20.0
#: Fewest frames of training speech a tree leaf and a Gaussian of the alignment ladder get.
FRAMES_PER_LEAF = 900
FRAMES_PER_GAUSSIAN = 150
#: Hours of training speech from which the recipes add lattice-free MMI after the cross-entropy.
LFMMI_HOURS = 2.0
#: Frames of each neighbouring chunk a chunk is trained and decoded with (``train --context``),
#: below ``ADAPT_STREAMS_HOURS`` of training speech; 0 beyond.
CONTEXT_FRAMES = 10
#: Dropout between the LSTM layers and SpecAugment's masks (``train --dropout``,
#: ``--spec-augment``; :class:`asrtrain.train.augment.SpecAugment`'s defaults) below
#: ``ADAPT_STREAMS_HOURS`` of training speech; off beyond.
DROPOUT = 0.2
SPEC_AUGMENT = str(SpecAugment())
#: Networks decoded as one (``decode --ensemble``) from ``ENSEMBLE_HOURS`` up to
#: ``ADAPT_STREAMS_HOURS`` of training speech; one elsewhere.
ENSEMBLE_MEMBERS = 2
ENSEMBLE_HOURS = 2.0
#: Whole utterances a lattice-free MMI step sums over (speechocean762's runs; train-seq's learners
#: each take a share of them, so more learners than this would idle).
LFMMI_UTTS_PER_STEP = 8
#: The network's question tree (below 20 h) has this many leaves for each of the aligner's.
NETWORK_LEAVES_PER_ALI_LEAF = 2
#: Fewest optimizer steps an epoch that the batch rule allows, down to ``MIN_BATCH``.
MIN_STEPS_PER_EPOCH = 1000
MIN_BATCH = 16


def _clip(x: float, lo: int, hi: int, step: int = 10) -> int:
    return int(min(hi, max(lo, step * round(x / step))))


def batch_for(frames: int, batch: int, chunk: int = CHUNK_FRAMES) -> int:
    """``batch`` halved until an epoch of ``frames`` holds ``MIN_STEPS_PER_EPOCH`` steps,
    but not below ``MIN_BATCH``."""
    chunks = frames // chunk
    while batch > MIN_BATCH and chunks < MIN_STEPS_PER_EPOCH * batch:
        batch //= 2
    return batch


def recipe_sizes(frames: int, lm_tokens: int | None = None,
                 chunk: int = CHUNK_FRAMES) -> dict[str, int | float | str]:
    """The sizes for ``frames`` 10-ms frames of training speech (and an LM text of
    ``lm_tokens`` words)."""
    if frames <= 0:
        raise InputError("no training frames: cannot size the recipe")
    h = frames / FRAMES_PER_HOUR
    leaves = _clip(min(1200 * h ** 0.35, frames / FRAMES_PER_LEAF), 50, 7000)
    small, medium, large = h < 2, h < 20, h < 200
    # below: the SAT stream, the context, dropout and SpecAugment; beyond, the papers' setup
    few_hours = h < ADAPT_STREAMS_HOURS
    hidden, layers = (160, 3) if small else (320, 4) if medium else (512, 5) if large else (512, 6)
    base_batch = 128 if medium else 256
    batch = batch_for(frames, base_batch, chunk)
    sizes: dict[str, int | float | str] = {
        "hours": round(h, 3),
        "ali_mono_gauss": _clip(min(1000, frames / 90), 30, 1000),
        "ali_leaves": leaves,
        "ali_gauss": _clip(min(6 * leaves, frames / FRAMES_PER_GAUSSIAN), leaves, 200_000),
        "num_pdfs": (NETWORK_LEAVES_PER_ALI_LEAF * leaves if medium
                     else _clip(400 * h ** 0.6, 30, 40_000)),
        "hidden": hidden, "layers": layers, "proj": hidden // 2,
        "epochs": 12 if large else 16,
        "batch": batch, "base_batch": base_batch,
        "lr": 0.5 if medium else 0.1,
        "lr_schedule": "plateau" if medium else "paper",
        "plateau_stop": 3 if medium else "",
        "select": "average:3" if medium else "best",
        "ubm_components": 64 if small else 256,
        "fmllr_gmm_components": 64 if small else 256,
        "ivector_dim": 100,
        "streams": "fmllr,logmel" if few_hours else "fmllr,ivector,logmel",
        "fmllr_source": "sat" if few_hours else "global",
        "hybrid_tree": "questions" if medium else "counts",
        # at most one whole neighbour (train's limit): a recipe with a shorter --chunk gets it all
        "context": min(CONTEXT_FRAMES, chunk) if few_hours else 0,
        "dropout": DROPOUT if few_hours else 0.0,
        "spec_augment": SPEC_AUGMENT if few_hours else "off",
        "lfmmi": "true" if h >= LFMMI_HOURS else "false",
        "lfmmi_utts_per_step": LFMMI_UTTS_PER_STEP,
        "members": ENSEMBLE_MEMBERS if few_hours and h >= ENSEMBLE_HOURS else 1,
    }
    if lm_tokens is not None:
        sizes["lm_order"] = 2 if lm_tokens < 20_000 else 3 if lm_tokens < 2_000_000 else 4
    return sizes


def learners_for(gpus: int, cores: int = 1) -> dict[str, int | str]:
    """``strategy`` and ``nproc`` for training on a machine with ``gpus`` GPUs (0: CPUs only), and
    ``lfmmi_nproc``, train-seq's learners: one a GPU, or on CPUs one a core up to a step's
    utterances (the denominator's sparse products gain less from threads than from learners: on 2 cores an epoch
    of speechocean762's LF-MMI ran at 1,764 frames/s on two learners, 1,550 on one learner with
    both threads, 990 on one thread; ``scripts/bench_lfmmi.py``)."""
    seq = gpus if gpus >= 1 else max(1, min(cores, LFMMI_UTTS_PER_STEP))
    if gpus >= 2:
        return {"strategy": "ssgd", "nproc": gpus, "lfmmi_nproc": seq}
    return {"strategy": "single", "nproc": 1, "lfmmi_nproc": seq}


def count_frames(feats_dir: Path) -> tuple[int, int]:
    """``(frames, utterances)`` of the distinct speech in a features dir (its
    ``utt2num_frames``): where ``utt2uniq`` names copies of one recording (speed
    perturbation), each recording counts once, at its own length where it is among them,
    so perturbing a corpus does not make its models bigger (Kaldi's recipes keep their
    sizes with speed perturbation)."""
    path = Path(feats_dir) / "utt2num_frames"
    lengths: dict[str, int] = {}
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2 or not parts[1].isdigit():
            raise InputError(f"line {n}: expected 'utt frames'", path)
        lengths[parts[0]] = int(parts[1])
    uniq = _utt2uniq(Path(feats_dir) / "utt2uniq")
    chosen: dict[str, int] = {}
    for utt, frames in lengths.items():
        source = uniq.get(utt, utt)
        if source not in chosen or utt == source:
            chosen[source] = frames
    return sum(chosen.values()), len(chosen)


def _utt2uniq(path: Path) -> dict[str, str]:
    """utt → the recording it copies; empty without the file."""
    if not path.is_file():
        return {}
    table = {}
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise InputError(f"line {n}: expected 'utt original-utt'", path)
        table[parts[0]] = parts[1]
    return table


def count_tokens(text: Path) -> int:
    """Words of an LM text (one sentence a line)."""
    return sum(len(line.split()) for line in read_lines(text))


def shell_lines(sizes: Mapping[str, int | float | str]) -> str:
    """``name=value`` lines a recipe can source."""
    return "".join(f"{k}={v}\n" for k, v in sizes.items())
