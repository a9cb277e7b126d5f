"""``asrtrain train``: train the BLSTM acoustic model on a training archive.

Thin: the options' defaults and choices come from the config dataclasses
(:class:`TrainConfig`, :class:`ModelConfig`, :class:`DistConfig`), the command
builds them and calls :func:`asrtrain.train.run.run` (or ``plan`` for ``--dry-run``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from asrtrain.cli.options import config_option, default_of, resolved_params
from asrtrain.distributed.config import BACKENDS, STRATEGIES, TOPOLOGIES, TRANSPORTS, DistConfig
from asrtrain.model.config import ModelConfig
from asrtrain.train.config import (
    LR_SCHEDULES,
    OPTIMIZERS,
    PRECISIONS,
    PRIOR_SOURCES,
    WARMUP_GRANULARITIES,
    TrainConfig,
)

MODEL_SIZES = ("hidden", "layers", "proj", "dropout")


def _t(name: str) -> Any:
    return default_of(TrainConfig, name)


def _d(name: str) -> Any:
    return default_of(DistConfig, name)


def _model_sizes(model_config: Path | None, options: dict[str, Any]) -> ModelConfig:
    """Model sizes: the paper's, then the file's values, then the explicit options on top."""
    from asrtrain.core.config import load_config
    from asrtrain.core.errors import ConfigError

    sizes: dict[str, Any] = {}
    if model_config is not None:
        data = load_config(model_config)
        if "model" in data and isinstance(data["model"], dict):
            data = {k.replace("-", "_"): v for k, v in data["model"].items()}
        try:
            ModelConfig.from_dict(data)
        except ConfigError as exc:
            raise ConfigError(str(exc), model_config) from None
        sizes.update(data)
    sizes.update({k: v for k, v in options.items() if v is not None})
    return ModelConfig.from_dict(sizes)


def _usage_check(option: str, parse: str) -> Any:
    """A click callback making a malformed ``option`` a usage error: ``parse`` ("module:function")
    raises ConfigError on it (whether it fits the archive or --valid is said at training)."""

    def check(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        from importlib import import_module

        from asrtrain.core.errors import ConfigError

        module, name = parse.split(":")
        try:
            getattr(import_module(module), name)(value)
        except ConfigError as exc:
            raise click.BadParameter(str(exc).removeprefix(f"{option} "), ctx, param) from None
        return value

    return check


_check_select = _usage_check("--select", "asrtrain.train.select:parse_selection_with_valid")
_check_streams = _usage_check("--streams", "asrtrain.data.streams:parse_streams")
_check_spec_augment = _usage_check("--spec-augment", "asrtrain.train.augment:parse_spec_augment")


def _show(title: str, plan: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for key, value in plan.items():
        table.add_row(str(key), str(value))
    Console().print(table)


@click.command()
@config_option
@click.argument("archive", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("exp", type=click.Path(file_okay=False, path_type=Path))
@click.option("--valid", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Held-out archive, evaluated after every epoch.")
@click.option("--epochs", type=click.IntRange(min=1), default=_t("epochs"), show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=_t("batch"), show_default=True,
              help="Effective batch in 21-frame chunks per step, summed over all learners.")
@click.option("--lr", type=click.FloatRange(min=0), default=_t("lr"), show_default=True,
              help="Base learning rate at --base-batch.")
@click.option("--base-batch", type=click.IntRange(min=1), default=_t("base_batch"), show_default=True,
              help="The batch the base rate is given for (linear scaling to --batch).")
@click.option("--warmup-epochs", type=click.IntRange(min=0), default=_t("warmup_epochs"), show_default=True,
              help="Epochs of linear warm-up from the base rate to the scaled peak.")
@click.option("--warmup-granularity", type=click.Choice(WARMUP_GRANULARITIES), default=_t("warmup_granularity"),
              show_default=True, help="Raise the rate once per epoch or at every step.")
@click.option("--anneal", type=float, default=_t("anneal"), show_default=True,
              help="Factor per epoch after the warm-up (--lr-schedule paper).")
@click.option("--lr-schedule", type=click.Choice(LR_SCHEDULES), default=_t("lr_schedule"), show_default=True,
              help="paper: after the warm-up, multiply the rate by --anneal every epoch. plateau (needs "
                   "--valid): after the warm-up keep the peak rate while each epoch's held-out loss improves "
                   "on the best so far by more than --plateau-threshold, halve it when it does not "
                   "(Kaldi's newbob).")
@click.option("--plateau-threshold", type=click.FloatRange(min=0, max=1, max_open=True),
              default=_t("plateau_threshold"), show_default=True,
              help="Relative held-out improvement an epoch must beat to keep the rate (0.01: 1%, Kaldi's "
                   "start_halving_impr).")
@click.option("--plateau-stop", type=click.IntRange(min=0), default=_t("plateau_stop"),
              help="Early stopping with --lr-schedule plateau: end training at the first plateau after the "
                   "rate was halved this many times [never: train all --epochs].")
@click.option("--select", type=str, default=_t("select"), show_default=True, metavar="auto|best|last|average:N",
              callback=_check_select,
              help="Which model becomes final.pt: best (the epoch with the lowest held-out loss), last, or "
                   "average:N (the parameter mean of the last N epoch checkpoints, as Kaldi nnet3 averages; "
                   "the BLSTM has no BatchNorm, so a plain mean is right). auto: best with --valid, as a "
                   "speech recipe picks its model on held-out data (later epochs of a small corpus overfit), "
                   "else last. The pick is logged, in metrics.jsonl, EXP/selection.json and final.pt.")
@click.option("--priors", type=click.Choice(PRIOR_SOURCES), default=_t("priors"), show_default=True,
              help="final.pt's state priors, which the decoder divides the posteriors by: posterior (the "
                   "model's mean posterior over training frames, as Kaldi's nnet3 recipes adjust them; "
                   "lower dev WER on speechocean762 for all four models tried) or counts (the "
                   "alignments' pdf frequencies).")
@click.option("--context", type=click.IntRange(min=0), default=_t("context"), show_default=True,
              help="Frames of each neighbouring chunk of the same utterance a 21-frame chunk is given on "
                   "either side (Kaldi's chunk left/right context); the loss counts the chunk's own frames, "
                   "and decoding gives the model the same context. Costs (chunk + 2 x context) / chunk.")
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default=_t("optimizer"), show_default=True,
              help="sgd: SGD with momentum (the papers'). adam: AdamW (beta1 = --momentum, beta2 = 0.999), "
                   "whose rates are about 1e-3: give an --lr whose scaled peak is of that order.")
@click.option("--momentum", type=float, default=_t("momentum"), show_default=True,
              help="SGD's momentum, or Adam's beta1.")
@click.option("--nesterov/--no-nesterov", default=_t("nesterov"), show_default=True, help="SGD only.")
@click.option("--weight-decay", type=float, default=_t("weight_decay"), show_default=True,
              help="L2 on the weights (SGD), decoupled weight decay (Adam).")
@click.option("--clip", type=float, default=_t("clip"), show_default=True,
              help="Maximum gradient norm (0: no clipping).")
@click.option("--model-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="YAML/TOML of model sizes (hidden, layers, proj, dropout).")
@click.option("--hidden", type=click.IntRange(min=1), default=None,
              help=f"LSTM cells per direction [{ModelConfig.hidden}].")
@click.option("--layers", type=click.IntRange(min=1), default=None, help=f"BiLSTM layers [{ModelConfig.layers}].")
@click.option("--proj", type=click.IntRange(min=0), default=None,
              help=f"Projection size, 0 for none [{ModelConfig.proj}].")
@click.option("--dropout", type=float, default=None, help=f"Dropout between LSTM layers [{ModelConfig.dropout:g}].")
@click.option("--streams", type=str, default=_t("streams"), metavar="NAMES", callback=_check_streams,
              help="Comma list of the archive's streams the model reads (e.g. logmel or fmllr,logmel; "
                   "`asrtrain info ARCHIVE` lists them), taken in the archive's order: one archive serves an "
                   "input ablation. The held-out archive and decoding give the same streams by name; final.pt "
                   "records them. [default: all, the archive's whole input]")
@click.option("--spec-augment", type=str, default=_t("spec_augment"), metavar="SPEC",
              callback=_check_spec_augment,
              help="SpecAugment masks on training batches (never held-out or decoding), per 21-frame chunk: "
                   "F bands of up to f logmel bins (the same bins zeroed in the static, delta and delta-delta "
                   "blocks) and T spans of up to t frames of every logmel column, set to 0 (the CMVN mean). "
                   "SPEC: F=2,f=8,T=2,t=5 (fields left out keep these defaults), on (the defaults) or off. "
                   "Needs a logmel stream; drawn from a seeded generator checkpointed with the run. "
                   "[default: off]")
@click.option("--label-smoothing", type=click.FloatRange(0, 1, max_open=True),
              default=_t("label_smoothing"), show_default=True, metavar="EPS",
              help="Train on targets of 1 - EPS on the aligned pdf and EPS spread over all pdfs (the "
                   "training loss logged is that loss; the held-out loss stays the plain cross-entropy).")
@click.option("--seed", type=int, default=_t("seed"), show_default=True)
@click.option("--resume/--no-resume", default=_t("resume"), show_default=True,
              help="Continue from the last complete checkpoint in EXP when there is one.")
@click.option("--log-every", type=click.IntRange(min=1), default=_t("log_every"), show_default=True,
              help="Steps between metrics.jsonl rows.")
@click.option("--tensorboard/--no-tensorboard", default=_t("tensorboard"), show_default=True,
              help="Also write the metrics.jsonl rows as TensorBoard events in EXP/tensorboard "
                   "(tensorboard --logdir EXP).")
@click.option("--precision", type=click.Choice(PRECISIONS), default=_t("precision"),
              show_default=True, help="auto: bf16 autocast on GPU, fp32 on CPU.")
@click.option("--cuda-graph/--no-cuda-graph", default=_t("cuda_graph"), show_default=True,
              help="On a GPU, capture the training step once as a CUDA graph and replay it (one learner's "
                   "own model, without SpecAugment or dropout; else the plain step).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch CPU threads.")
@click.option("--block-chunks", type=click.IntRange(min=1), default=None,
              help="Chunks per loader block (default: the loader's).")
@click.option("--max-steps-per-epoch", type=click.IntRange(min=1), default=None,
              help="Cut every epoch after this many steps (smoke tests).")
@click.option("--keep-checkpoints", type=click.IntRange(min=0), default=_t("keep_checkpoints"), show_default=True,
              help="Keep only the newest N epoch checkpoints (0: all).")
@click.option("--save-every", "save_every_minutes", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Also checkpoint in the middle of an epoch every this many minutes (a preempted or "
                   "killed job resumes from there).")
@click.option("--save-every-steps", type=click.IntRange(min=1), default=None,
              help="Also checkpoint in the middle of an epoch every this many steps (of the main learner).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="single", show_default=True)
@click.option("--group-size", type=click.IntRange(min=1), default=None,
              help="Learners per super-learner (h-adpsgd; default: one node).")
@click.option("--topology", type=click.Choice(TOPOLOGIES), default=_d("topology"), show_default=True)
@click.option("--nproc", type=click.IntRange(min=1), default=_d("nproc"), show_default=True,
              help="Local learner processes to start.")
@click.option("--gossip-seed", type=int, default=_d("gossip_seed"), show_default=True,
              help="Seed of the randomized ring (every learner draws the same rings).")
@click.option("--gossip-transport", type=click.Choice(TRANSPORTS), default=_d("gossip_transport"), show_default=True,
              help="auto: learners on one host exchange weights through shared memory (CPU); "
                   "group: always through the gossip process group.")
@click.option("--backend", type=click.Choice(BACKENDS), default=_d("backend"),
              show_default=True, help="torch.distributed backend (auto: NCCL on GPUs, gloo on CPUs).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=_d("timeout_s"),
              show_default=True, help="Seconds before a silent learner is reported.")
@click.option("--global-average/--no-global-average", default=_d("global_average"), show_default=True,
              help="At each epoch's end, average all learners' weights for validation, the checkpoint "
                   "and final.pt (ADPSGD/H-ADPSGD). Without it each learner keeps its own weights and "
                   "rank 0's are validated and saved.")
@click.option("--elastic/--no-elastic", default=_d("elastic"), show_default=True,
              help="ADPSGD/H-ADPSGD: when a learner (or a super-learner) dies, the others re-form the ring "
                   "and train on (with --nproc, or srun --kill-on-bad-exit=0).")
@click.option("--min-learners", type=click.IntRange(min=1), default=None,
              help="With --elastic: stop when fewer learners than this are left [half the job].")
@click.option("--dry-run", is_flag=True, help="Print the plan and exit.")
@click.pass_context
def train(ctx: click.Context, archive: Path, exp: Path, model_config: Path | None, threads: int | None,
          strategy: str, group_size: int | None, topology: str, nproc: int, gossip_seed: int,
          gossip_transport: str, backend: str, timeout_s: float, global_average: bool, elastic: bool,
          min_learners: int | None, dry_run: bool, config: str | None, **options: Any) -> None:
    """Train the BLSTM acoustic model on ARCHIVE (.h5, or a shard manifest .json) into EXP.

    EXP gets config.yaml, log/, metrics.jsonl, checkpoints/epoch-N/, final.pt and
    selection.json. The learning rate starts at --lr, rises linearly over
    --warmup-epochs to --lr x --batch / --base-batch, then falls by --anneal per
    epoch, or with --lr-schedule plateau is halved whenever the held-out loss stops
    improving. final.pt is the model --select picks: by default the epoch with the
    lowest held-out loss when --valid is given, else the last; checkpoints it may
    still pick are kept whatever --keep-checkpoints says.

    Run again, it resumes from the newest checkpoint, also on another number of
    learners. SIGTERM or SIGUSR1 make every learner finish its step, checkpoint and
    exit with status 75, on which the cluster scripts requeue the job.
    """
    from asrtrain.core.runlog import command_run
    from asrtrain.distributed.launch import detect

    model = _model_sizes(model_config, {k: options.pop(k) for k in MODEL_SIZES})
    cfg = TrainConfig(archive=archive, exp=exp, model=model, num_threads=threads, **options)
    dist = DistConfig(strategy=strategy, group_size=group_size, topology=topology, nproc=nproc,
                      gossip_seed=gossip_seed, gossip_transport=gossip_transport, backend=backend,
                      timeout_s=timeout_s, global_average=global_average, elastic=elastic,
                      min_learners=min_learners)
    from asrtrain.train.run import plan, run

    if dry_run:
        _show("asrtrain train (dry run)", plan(cfg, dist))
        return
    place = detect()
    if place is not None and place.rank != 0:  # other ranks of a launcher: rank 0 writes the run's files
        run(cfg, dist)
        return
    with command_run("train", exp, resolved_params(ctx), config_name="config.yaml",
                     extra_fingerprint={"strategy": strategy}) as this_run:
        result = run(cfg, dist, main_log=this_run.log_path)
        if result is not None and result.final_path is not None:
            click.echo(f"final model: {result.final_path}")
