"""Sequence training: a cross-entropy ``final.pt`` trained further with MMI on denominator lattices.

Read top to bottom: load the model and the training archive (the reference pdfs are its
targets), the lattices a decoding of that archive kept (``decode --lattices``, one search
per utterance with the cross-entropy model), then epochs of steps over a few whole
utterances each: the network's log-posteriors with gradient, the lattice's forward-backward
on them (``mmi.py``), the loss ``−Σ κ(γ_num − γ_den)·log p(s|x)`` plus a share of the
frame cross-entropy (Su et al.'s frame smoothing: MMI alone drifts from the frame targets
and overfits small corpora), SGD with momentum. Each epoch writes ``epoch<N>.pt`` (a
``final.pt``: the priors, layout and metadata of the model it started from) and its
held-out frame figures, and ``state.pt`` (weights, momentum, torch's RNG, the history): a run
killed mid-epoch starts again after its last whole epoch, and ends where an unbroken run would.
``final.pt`` is the last epoch's. A preemption signal (SIGTERM, SIGUSR1, a first Ctrl-C) to
any learner stops every one at the next step, before its update, with the requeue status: the
same command starts that epoch again. Several learners (``--nproc``, or a launcher's ranks) are
SSGD: each takes every W-th utterance of the step, the loss is divided by the step's frames over
all of them and the gradients are summed (``Strategy.sum_gradients``), so W learners make the
steps one learner makes; the main learner writes the models and the state.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from asrtrain.core.atomic import atomic_path, write_text
from asrtrain.core.errors import ConfigError, InputError, Preempted
from asrtrain.distributed import signals
from asrtrain.distributed.base import Strategy
from asrtrain.train.sequence_config import SequenceConfig

if TYPE_CHECKING:
    from asrtrain.model.blstm import BLSTM

log = logging.getLogger("asrtrain.train")
#: The run's state after its last whole epoch, beside the epochs' models.
STATE = "state.pt"


def read_lattices(decode_dir: Path, num_pdfs: int) -> dict[str, Any]:
    """Every utterance's lattice of a decode dir, unrolled to frames; an empty lattice (a
    search that kept nothing) is left out."""
    from asrtrain.decode.lattice_io import read_archive
    from asrtrain.train.mmi import LatticeFrames

    files = sorted((decode_dir / "lat").glob("lat.*.gz"))
    if not files:
        raise InputError("no lattice archives (lat/lat.*.gz): decode the training archive with --lattices",
                         decode_dir)
    out: dict[str, Any] = {}
    for path in files:
        for utt, lat in read_archive(path):
            if not lat.num_states:
                continue
            frames = LatticeFrames.of(lat)
            top = max(frames.arc_pdf.max(initial=-1), frames.final_pdf.max(initial=-1))
            if top >= num_pdfs or min(frames.arc_pdf.min(initial=0), frames.final_pdf.min(initial=0)) < 0:
                raise InputError(f"utterance {utt}: lattice label of pdf {top} outside the model's "
                                 f"{num_pdfs} pdfs (a graph of another tree)", path)
            out[utt] = frames
    return out


def check_tree(decode_dir: Path, archive: Any) -> None:
    """Refuse lattices whose labels are not pdfs of the archive's targets: a Kaldi graph's
    transition-ids (no ``pdf_map_id``), or a graph of another tree than the one beside the
    targets (``prepare lang``'s ``pdf_ali/`` and ``tree``), when that tree is still there."""
    from asrtrain.decode.first_pass import decoded_pdf_map_id
    from asrtrain.decode.job import tree_pdf_map_id

    theirs = decoded_pdf_map_id(decode_dir, "lattices of a Kaldi graph (transition-ids) cannot be "
                                            "read as pdfs here; decode on asrtrain's graph")
    tree = _targets_lang_file(archive, "tree")
    if tree is None:
        log.warning("the training targets' tree is not at hand: the lattices' pdfs are assumed to be theirs")
        return
    ours = tree_pdf_map_id(tree)
    if theirs != ours:
        raise InputError(f"the lattices were decoded on a graph of another tree ({theirs}) than the "
                         f"archive's targets ({ours}, {tree})", decode_dir)


def _targets_lang_file(archive: Any, name: str) -> Path | None:
    """A file of the lang dir whose ``pdf_ali/`` the archive's targets came from, if still there."""
    ali = ((archive.header or {}).get("options") or {}).get("ali")
    path = Path(str(ali)).parent.parent / name if ali else None
    return path if path is not None and path.is_file() else None


def open_den_graph(path: Path, archive: Any, num_pdfs: int) -> Any:
    """A denominator graph (``prepare den-graph``) as matrices, refused when it was built on
    another tree than the archive's targets (when their lang's ``tree_id`` is at hand)."""
    from asrtrain.core.textio import read_text
    from asrtrain.train.den_graph import DenGraph
    from asrtrain.train.lfmmi import DenMatrices

    graph = DenGraph.load(path)
    tree_id = _targets_lang_file(archive, "tree_id")
    if tree_id is None:
        log.warning("the training targets' tree is not at hand: the graph's pdfs are assumed to be theirs")
    elif read_text(tree_id).strip() != graph.tree_id:
        raise InputError(f"the denominator graph was built on tree {graph.tree_id}, the archive's "
                         f"targets on {read_text(tree_id).strip()} ({tree_id})", path)
    if graph.num_states and int(graph.pdf.max()) >= num_pdfs:
        raise InputError(f"the denominator graph has pdf {int(graph.pdf.max())}, the model "
                         f"{num_pdfs} outputs", path)
    log.info("lattice-free MMI: denominator graph %s, %d states, %d transitions", path,
             graph.num_states, graph.src.size)
    return DenMatrices.of(graph, num_pdfs)


def references(archive: Any, utts: list[tuple[str, tuple[int, int, int]]]) -> dict[str, np.ndarray]:
    """Each utterance's reference pdfs (the archive's targets, padding cut), read once."""
    out = {}
    for utt, (first, count, frames) in utts:
        _, targets = archive.read_chunks(first, first + count)
        ref = targets.reshape(-1)[:frames].astype(np.int64)
        if ref.size and ref.min() < 0:
            raise InputError(f"utterance {utt}: frame {int(np.argmax(ref < 0))} has no target", archive.path)
        out[utt] = ref
    return out


class SequenceTrainer:
    """The state of one sequence-training run (model, data, optimiser) and its loop."""

    def __init__(self, model_path: Path, archive_path: Path, lat_dir: Path, out: Path,
                 cfg: SequenceConfig, valid_path: Path | None = None, device: str | None = None,
                 strategy: Strategy | None = None) -> None:
        from asrtrain.data.context import check_context
        from asrtrain.data.streams import model_input
        from asrtrain.decode.loglikes import decode_context, log_priors
        from asrtrain.model.io import load_final
        from asrtrain.train.validate import open_archive
        from asrtrain.transcribe.network import pick_device

        cfg.check()
        self.strategy = strategy or Strategy()
        self.device = pick_device(device or (self.strategy.device if self.strategy.world_size > 1 else None))
        self.cfg, self.out, self.model_path = cfg, Path(out), Path(model_path)
        self.final = load_final(model_path)
        self.archive = open_archive(Path(archive_path), "training")
        if self.archive.num_pdfs != self.final.config.num_pdfs:
            raise InputError(f"the archive's targets have {self.archive.num_pdfs} pdfs, the model "
                             f"{self.final.config.num_pdfs}: they come from different trees", archive_path)
        self.input = model_input(self.final.meta, self.archive)
        self.context = decode_context(self.final.meta)
        check_context(self.context, self.archive.chunk)
        self.log_prior = torch.from_numpy(log_priors(self.final.priors, self.final.config.num_pdfs, model_path)
                                          ).to(self.device)
        self.valid = open_archive(Path(valid_path), "held-out") if valid_path else None
        self.lattices: dict[str, Any] = {}
        self.den: Any = None
        if Path(lat_dir).is_file():   # a denominator graph (prepare den-graph): lattice-free
            self.den = open_den_graph(Path(lat_dir), self.archive, self.final.config.num_pdfs).to(self.device)
            self.utts = [(u, (f, n, t)) for u, f, n, t in self.archive.utterances]
        else:
            self.utts = self._lattice_utts(Path(lat_dir))
        self.refs = references(self.archive, self.utts)
        self.criterion = "lf-mmi" if self.den is not None else "mmi"
        model = fresh_weights(self.final.model, cfg.seed) if cfg.from_scratch else self.final.model
        self.model = model.to(self.device)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr, momentum=cfg.momentum)

    def _lattice_utts(self, lat_dir: Path) -> list[tuple[str, tuple[int, int, int]]]:
        """The training utterances that have a lattice in ``lat_dir`` (a decode dir or its lat/)."""
        decode_dir = lat_dir.parent if any(lat_dir.glob("lat.*.gz")) else lat_dir
        self.lattices = read_lattices(decode_dir, self.final.config.num_pdfs)
        check_tree(decode_dir, self.archive)
        utts = [(u, (f, n, t)) for u, f, n, t in self.archive.utterances if u in self.lattices]
        missing = len(self.archive.utterances) - len(utts)
        if not utts:
            raise InputError("no utterance of the training archive has a lattice here", lat_dir)
        if missing:
            log.warning("%d of %d training utterances have no lattice (no search survived, or not "
                        "decoded): trained on the other %d", missing, len(self.archive.utterances), len(utts))
        return utts

    def _group_loss(self, group: list[tuple[str, tuple[int, int, int]]]
                    ) -> tuple[torch.Tensor, list[dict[str, float]]]:
        """The summed loss of a step's utterances and each one's figures (MMI objective, kept
        frames): against its lattice, or all of them at once against the denominator graph."""
        from asrtrain.decode.loglikes import utterance_logits
        from asrtrain.train.lfmmi import lfmmi_targets
        from asrtrain.train.mmi import mmi_targets

        logps = [torch.log_softmax(utterance_logits(self.model, self.archive, self.input, span, self.context,
                                                    self.device), dim=-1) for _, span in group]
        scores = [(lp.detach() - self.log_prior).cpu().numpy() for lp in logps]
        refs = [self.refs[utt] for utt, _ in group]
        try:
            if self.den is not None:
                mmis = lfmmi_targets(self.den, scores, refs, self.cfg.acwt)
            else:
                mmis = [mmi_targets(self.lattices[utt], sc, ref, self.cfg.acwt, self.cfg.drop_frames)
                        for (utt, _), sc, ref in zip(group, scores, refs, strict=True)]
        except ValueError as exc:
            raise InputError(f"utterances {[u for u, _ in group]}: {exc}") from None
        losses, figs = [], []
        for logp, ref, mmi in zip(logps, refs, mmis, strict=True):
            weights = torch.from_numpy(mmi.weights).to(self.device)
            ce = -logp[torch.arange(ref.size, device=self.device), torch.from_numpy(ref).to(self.device)].sum()
            losses.append(-(weights * logp).sum() + self.cfg.ce_weight * ce)
            figs.append({"objective": mmi.objective, "frames": float(ref.size), "kept": float(mmi.kept.sum()),
                         "num_post": mmi.num_post * float(mmi.kept.sum()), "ce": float(ce.detach())})
        return torch.stack(losses).sum(), figs

    def _share(self, utts: list[Any]) -> list[Any]:
        """This learner's utterances of a step or sample: every W-th from its rank."""
        return utts[self.strategy.rank::self.strategy.world_size]

    def epoch(self, n: int) -> dict[str, float]:
        """One pass over the utterances in a seeded order; the figures summed over it."""
        rng = np.random.default_rng(self.cfg.seed + n)
        order = rng.permutation(len(self.utts))[: self.cfg.max_utts]
        sums = dict.fromkeys(("objective", "frames", "kept", "num_post", "ce"), 0.0)
        self.model.train()
        for group_opts in self.opt.param_groups:
            group_opts["lr"] = self.cfg.epoch_lr(n)
        start, shown = time.monotonic(), time.monotonic()
        for i in range(0, len(order), self.cfg.utts_per_step):
            group = [self.utts[k] for k in order[i:i + self.cfg.utts_per_step]]
            self.opt.zero_grad(set_to_none=True)
            share = self._share(group)
            loss, group_figs = self._group_loss(share) if share else (None, [])
            mine = sum(f["frames"] for f in group_figs)
            for figs in group_figs:
                for k, v in figs.items():
                    sums[k] += v
            frames, summed, stop = self.strategy.all_sum([mine, float(loss.detach()) if loss is not None else 0.0,
                                                          float(signals.requested() is not None)])
            if stop:   # any learner's: all stop before this step's update, the epoch to be done again
                kept = f"{self.out / STATE} holds epoch {n - 1}" if n > 1 else "no epoch was done yet"
                raise Preempted(f"stopped in epoch {n} (a preemption signal); {kept}: run the same "
                                "command again to go on")
            if not math.isfinite(summed):
                raise InputError(f"a non-finite MMI loss at utterances {[u for u, _ in group]}")
            if loss is not None:
                (loss / frames).backward()
            self.strategy.sum_gradients(self.model)
            if self.cfg.clip is not None:   # after the sum: every learner clips the same gradient
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip)
            self.opt.step()
            if time.monotonic() - shown > 30 and self.strategy.is_main:
                shown = time.monotonic()
                log.info("sequence epoch %d: %d/%d utterances in %.0fs, objective %.4f a frame", n,
                         min(i + len(group), len(order)), len(order), shown - start,
                         sums["objective"] / max(sums["frames"], 1))
        sums = dict(zip(sums, self.strategy.all_sum(list(sums.values())), strict=True))
        frames = max(sums["frames"], 1.0)
        return {"epoch": n, "lr": self.cfg.epoch_lr(n), "mmi_objective": sums["objective"] / frames,
                "train_ce": sums["ce"] / frames, "kept_frames": sums["kept"] / frames,
                "ref_den_posterior": sums["num_post"] / max(sums["kept"], 1),
                "seconds": time.monotonic() - start, "frames_per_second": frames / (time.monotonic() - start)}

    @functools.cached_property
    def diagnostic(self) -> list[tuple[str, tuple[int, int, int]]]:
        """The utterances the objective is measured on: a fixed sample of ``--diagnostic-utts``
        (Kaldi's train_diagnostic), the same whatever the seed, so runs compare; a pass over a
        whole corpus would cost as much as a quarter of an epoch."""
        n = len(self.utts)
        pick = np.sort(np.random.default_rng(0).permutation(n)[: self.cfg.diagnostic_utts])
        return [self.utts[k] for k in pick]

    def objective(self) -> float:
        """The MMI objective a frame of the model as it is on the diagnostic sample (no update)."""
        total, frames = 0.0, 0.0
        utts = self._share(self.diagnostic)
        self.model.eval()
        with torch.no_grad():
            for i in range(0, len(utts), self.cfg.utts_per_step):
                for figs in self._group_loss(utts[i:i + self.cfg.utts_per_step])[1]:
                    total, frames = total + figs["objective"], frames + figs["frames"]
        total, frames = self.strategy.all_sum([total, frames])
        return total / max(frames, 1.0)

    def held_out(self) -> dict[str, float]:
        """The held-out frame loss and accuracy against the archive's targets (empty without one);
        each learner scores a share of its batches, summed."""
        if self.valid is None:
            return {}
        from asrtrain.data.context import with_context
        from asrtrain.train.validate import evaluate, figures

        sel = self.input.on(self.valid, "held-out")
        s = self.strategy
        return figures(s.all_sum(evaluate(self.model, with_context(self.valid, self.context), 64, self.device,
                                          None, s.rank, s.world_size, columns=sel.index)))

    def save(self, path: Path, history: list[dict[str, Any]]) -> Path:
        from asrtrain.model.io import save_final

        meta = dict(self.final.meta)
        meta["sequence"] = {"criterion": self.criterion, "init": str(self.model_path),
                            "config": asdict(self.cfg), "history": history}
        self.model.eval()
        return save_final(path, self.model, self.final.priors, self.final.layout, meta)

    def _key(self) -> dict[str, Any]:
        """What a saved state must share with this run to be continued: the starting model and
        every option but the diagnostic sample's size and the number of epochs (unless the rate
        decays over them)."""
        free = ("diagnostic_utts",) + (("epochs",) if self.cfg.final_lr is None else ())
        options = {k: v for k, v in asdict(self.cfg).items() if k not in free}
        return {"init": str(self.model_path.resolve()), "options": options, "criterion": self.criterion}

    def _save_state(self, epoch: int, history: list[dict[str, Any]]) -> None:
        state = {"epoch": epoch, "key": self._key(), "model": self.model.state_dict(),
                 "opt": self.opt.state_dict(), "rng": torch.get_rng_state(), "history": history}
        with atomic_path(self.out / STATE) as tmp:
            torch.save(state, tmp)

    def _resume(self) -> tuple[int, list[dict[str, Any]]] | None:
        """(last whole epoch, history) of a state this run may continue, loaded into the model."""
        path = self.out / STATE
        if not path.is_file():
            return None
        state = torch.load(path, map_location=self.device, weights_only=True)
        saved, ours = {"criterion": "mmi", **state["key"]}, self._key()   # states before lf-mmi
        defaults = asdict(SequenceConfig())   # options added since the state was written count as these
        saved["options"] = {**{k: defaults[k] for k in ours["options"]}, **saved["options"]}
        if saved != ours:
            differ = ["the starting model"] if saved["init"] != ours["init"] else []
            differ += [f"the criterion {saved['criterion']} (now {ours['criterion']})"
                       ] if saved["criterion"] != ours["criterion"] else []
            differ += [f"--{k.replace('_', '-')} {saved['options'].get(k)} (now {v})"
                       for k, v in ours["options"].items() if saved["options"].get(k) != v]
            raise ConfigError(f"{path} is of a run with other options: {', '.join(differ)}; give "
                              "another OUT, or --no-resume to start again")
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        torch.set_rng_state(state["rng"])
        return int(state["epoch"]), list(state["history"])

    def run(self, resume: bool = True) -> Path | None:
        """Every epoch left; the main learner returns ``final.pt``, the others ``None``."""
        main = self.strategy.is_main
        self.out.mkdir(parents=True, exist_ok=True)
        if not resume and main:
            (self.out / STATE).unlink(missing_ok=True)
        self.strategy.barrier()   # no learner reads a state the main one is removing
        resumed = self._resume()
        if resumed:
            done, history = resumed
            log.info("sequence training %s: resuming after epoch %d (%s)", self.model_path, done, self.out / STATE)
        else:
            done, history = 0, [{"epoch": 0, "diagnostic_objective": self.objective(), **self.held_out()}]
            log.info("sequence training %s: %d utterances, MMI at acoustic scale %g: objective %.4f a frame "
                     "on %d of them, %s", self.model_path, len(self.utts), self.cfg.acwt,
                     history[0]["diagnostic_objective"], len(self.diagnostic), _held_out_text(history[0]))
        for n in range(done + 1, self.cfg.epochs + 1):
            row = {**self.epoch(n), "diagnostic_objective": self.objective(), **self.held_out()}
            history.append(row)
            log.info("sequence epoch %d: MMI objective %.4f a frame while training, %.4f after it on the "
                     "diagnostic sample, %.1f%% of frames kept, reference posterior %.3f, %.0f frames/s | %s",
                     n, row["mmi_objective"], row["diagnostic_objective"], 100 * row["kept_frames"],
                     row["ref_den_posterior"], row["frames_per_second"], _held_out_text(row))
            if not math.isfinite(row["mmi_objective"]):
                raise InputError("the MMI objective is not finite: lower --lr", self.out)
            if main:
                self.save(self.out / f"epoch{n}.pt", history)
                self._save_state(n, history)
        if not main:
            return None
        write_text(self.out / "history.json", json.dumps(history, indent=1) + "\n")
        return self.save(self.out / "final.pt", history)


def fresh_weights(model: BLSTM, seed: int) -> BLSTM:
    """A network of ``model``'s shape with weights drawn as the cross-entropy trainer draws
    them (``torch.manual_seed(seed)``, then the constructor), its input normalisation kept."""
    from asrtrain.model.blstm import BLSTM

    torch.manual_seed(seed)
    fresh = BLSTM(model.config)
    with torch.no_grad():
        fresh.feat_mean.copy_(model.feat_mean)
        fresh.feat_std.copy_(model.feat_std)
    return fresh


def _held_out_text(row: dict[str, Any]) -> str:
    if "valid_loss" not in row:
        return "no held-out set"
    return f"held-out loss {row['valid_loss']:.4f} acc {100 * row['valid_acc']:.1f}%"


def learner(strategy: Strategy, model: Path, archive: Path, lattices: Path, out: Path, cfg: SequenceConfig,
            valid: Path | None, device: str | None, resume: bool, threads: int | None) -> Path | None:
    """One learner's part of ``train-seq`` (module level: it crosses to spawned workers)."""
    if threads is not None:
        torch.set_num_threads(threads)
    return SequenceTrainer(model, archive, lattices, out, cfg, valid, device, strategy).run(resume)


def run(model: Path, archive: Path, lattices: Path, out: Path, cfg: SequenceConfig, valid: Path | None = None,
        device: str | None = None, resume: bool = True, threads: int | None = None, nproc: int = 1,
        main_log: Path | None = None) -> Path | None:
    """``train-seq`` on one learner, ``nproc`` local ones, or the ranks a launcher (torchrun,
    mpiexec, srun) started: SSGD whenever there are several. Rank 0's ``final.pt``."""
    from asrtrain.distributed.config import DistConfig
    from asrtrain.distributed.entry import run_job
    from asrtrain.distributed.launch import detect
    from asrtrain.distributed.logs import parent_spec

    place = detect()
    world = place.world_size if place is not None else nproc
    dist_cfg = DistConfig(strategy="ssgd" if world > 1 else "single", nproc=nproc)
    logs = parent_spec(out / "log", main_log) if dist_cfg.distributed else None
    return run_job(learner, dist_cfg, model, archive, lattices, out, cfg, valid, device, resume, threads,
                   seed=cfg.seed, logs=logs)
