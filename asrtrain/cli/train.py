"""``asrtrain train``: train the BLSTM acoustic model on a training archive."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from asrtrain.cli.options import config_option, resolved_params

STRATEGIES = ("single", "ssgd", "adpsgd", "h-adpsgd")
# A launcher's environment (rank variable, and for SLURM a task count above 1).
LAUNCHER_RANK_VARS = ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK")


def launcher_rank() -> int | None:
    """This process's rank when a launcher (torchrun, mpiexec, srun) started it, else None."""
    for name in LAUNCHER_RANK_VARS:
        if os.environ.get(name, "").strip():
            return _env_int(name)
    if os.environ.get("SLURM_PROCID", "").strip() and _env_int("SLURM_NTASKS", 1) > 1:
        return _env_int("SLURM_PROCID")
    return None


def _env_int(name: str, default: int = 0) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        from asrtrain.core.errors import ConfigError

        raise ConfigError(f"environment variable {name}={value!r} is not an integer") from None


def _model_overrides(model_config: Path | None, sizes: dict[str, Any]) -> dict[str, Any]:
    """Model sizes: the file's values, then the explicit options on top."""
    out: dict[str, Any] = {}
    if model_config is not None:
        from asrtrain.core.config import load_config
        from asrtrain.core.errors import ConfigError

        data = load_config(model_config)
        if "model" in data and isinstance(data["model"], dict):
            data = {k.replace("-", "_"): v for k, v in data["model"].items()}
        known = {"hidden", "layers", "proj", "dropout", "input_dim", "num_pdfs"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown model option(s) {', '.join(unknown)}", model_config)
        out.update(data)
    out.update({k: v for k, v in sizes.items() if v is not None})
    return out


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
@click.option("--epochs", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--batch", type=click.IntRange(min=1), default=256, show_default=True,
              help="Effective batch in 21-frame chunks per step, summed over all learners.")
@click.option("--lr", type=float, default=0.1, show_default=True, help="Base learning rate at --base-batch.")
@click.option("--base-batch", type=click.IntRange(min=1), default=256, show_default=True,
              help="The batch the base rate is given for (linear scaling to --batch).")
@click.option("--warmup-epochs", type=click.IntRange(min=0), default=10, show_default=True,
              help="Epochs of linear warm-up from the base rate to the scaled peak.")
@click.option("--warmup-granularity", type=click.Choice(["epoch", "step"]), default="epoch",
              show_default=True, help="Raise the rate once per epoch or at every step.")
@click.option("--anneal", type=float, default=2 ** -0.5, show_default=True,
              help="Factor per epoch after the warm-up.")
@click.option("--momentum", type=float, default=0.9, show_default=True)
@click.option("--nesterov/--no-nesterov", default=False, show_default=True)
@click.option("--weight-decay", type=float, default=0.0, show_default=True)
@click.option("--clip", type=float, default=5.0, show_default=True,
              help="Maximum gradient norm (0: no clipping).")
@click.option("--model-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="YAML/TOML of model sizes (hidden, layers, proj, dropout).")
@click.option("--hidden", type=click.IntRange(min=1), default=None, help="LSTM cells per direction [512].")
@click.option("--layers", type=click.IntRange(min=1), default=None, help="BiLSTM layers [6].")
@click.option("--proj", type=click.IntRange(min=0), default=None, help="Projection size, 0 for none [256].")
@click.option("--dropout", type=float, default=None, help="Dropout between LSTM layers [0].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resume/--no-resume", default=True, show_default=True,
              help="Continue from the last complete checkpoint in EXP when there is one.")
@click.option("--log-every", type=click.IntRange(min=1), default=50, show_default=True,
              help="Steps between metrics.jsonl rows.")
@click.option("--precision", type=click.Choice(["auto", "fp32", "bf16"]), default="auto",
              show_default=True, help="auto: bf16 autocast on GPU, fp32 on CPU.")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch CPU threads.")
@click.option("--block-chunks", type=click.IntRange(min=1), default=None,
              help="Chunks per loader block (default: the loader's).")
@click.option("--max-steps-per-epoch", type=click.IntRange(min=1), default=None,
              help="Cut every epoch after this many steps (smoke tests).")
@click.option("--keep-checkpoints", type=click.IntRange(min=0), default=0, show_default=True,
              help="Keep only the newest N epoch checkpoints (0: all).")
@click.option("--strategy", type=click.Choice(STRATEGIES), default="single", show_default=True)
@click.option("--group-size", type=click.IntRange(min=1), default=None,
              help="Learners per super-learner (h-adpsgd; default: one node).")
@click.option("--topology", type=click.Choice(["ring", "random-ring"]), default="ring", show_default=True)
@click.option("--nproc", type=click.IntRange(min=1), default=1, show_default=True,
              help="Local learner processes to start.")
@click.option("--gossip-seed", type=int, default=0, show_default=True,
              help="Seed of the randomized ring (every learner draws the same rings).")
@click.option("--gossip-transport", type=click.Choice(["auto", "group"]), default="auto", show_default=True,
              help="auto: learners on one host exchange weights through shared memory (CPU); "
                   "group: always through the gossip process group.")
@click.option("--backend", type=click.Choice(["auto", "gloo", "nccl"]), default="auto",
              show_default=True, help="torch.distributed backend (auto: NCCL on GPUs, gloo on CPUs).")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, help="Seconds before a silent learner is reported.")
@click.option("--global-average/--no-global-average", default=True, show_default=True,
              help="At each epoch's end, average all learners' weights for validation, the checkpoint "
                   "and final.pt (ADPSGD/H-ADPSGD). Without it each learner keeps its own weights and "
                   "rank 0's are validated and saved.")
@click.option("--dry-run", is_flag=True, help="Print the plan and exit.")
@click.pass_context
def train(ctx: click.Context, archive: Path, exp: Path, valid: Path | None, epochs: int, batch: int,
          lr: float, base_batch: int, warmup_epochs: int, warmup_granularity: str, anneal: float,
          momentum: float, nesterov: bool, weight_decay: float, clip: float,
          model_config: Path | None, hidden: int | None, layers: int | None, proj: int | None,
          dropout: float | None, seed: int, resume: bool, log_every: int, precision: str,
          threads: int | None, block_chunks: int | None, max_steps_per_epoch: int | None,
          keep_checkpoints: int, strategy: str, group_size: int | None, topology: str,
          nproc: int, gossip_seed: int, gossip_transport: str, backend: str, timeout_s: float,
          global_average: bool,
          dry_run: bool, config: str | None) -> None:
    """Train the BLSTM acoustic model on ARCHIVE into the experiment directory EXP.

    EXP gets config.yaml, log/, metrics.jsonl, checkpoints/epoch-N/ and final.pt.
    The learning rate starts at --lr, rises linearly over --warmup-epochs to
    --lr x --batch / --base-batch, then falls by --anneal per epoch.
    """
    from asrtrain.core.runlog import command_run
    from asrtrain.model.blstm import ModelConfig
    from asrtrain.train.config import TrainConfig

    sizes = _model_overrides(model_config, {"hidden": hidden, "layers": layers, "proj": proj,
                                            "dropout": dropout})
    cfg = TrainConfig(archive=archive, exp=exp, valid=valid, epochs=epochs, batch=batch, lr=lr,
                      base_batch=base_batch, warmup_epochs=warmup_epochs,
                      warmup_granularity=warmup_granularity, anneal=anneal, momentum=momentum,
                      nesterov=nesterov, weight_decay=weight_decay, clip=clip, seed=seed,
                      model=ModelConfig.from_dict(sizes), log_every=log_every, resume=resume,
                      precision=precision, num_threads=threads, block_chunks=block_chunks,
                      max_steps_per_epoch=max_steps_per_epoch, keep_checkpoints=keep_checkpoints)
    rank = launcher_rank()
    distributed = strategy != "single" or nproc > 1 or rank is not None
    if distributed:
        from asrtrain.distributed.config import DistConfig

        dist = DistConfig(strategy=strategy, group_size=group_size, topology=topology,
                          nproc=nproc, gossip_seed=gossip_seed, gossip_transport=gossip_transport,
                          backend=backend,
                          timeout_s=timeout_s, global_average=global_average)
    if dry_run:
        if distributed:
            from asrtrain.distributed.entry import plan as dist_plan

            _show("asrtrain train (dry run)", dist_plan(cfg, dist))
        else:
            from asrtrain.train.trainer import plan

            _show("asrtrain train (dry run)", plan(cfg))
        return
    if rank not in (None, 0):  # other ranks of a launcher: rank 0 writes the run's files
        from asrtrain.distributed.entry import run

        run(cfg, dist)
        return
    with command_run("train", exp, resolved_params(ctx), config_name="config.yaml",
                     extra_fingerprint={"strategy": strategy}) as this_run:
        if distributed:
            from asrtrain.distributed.entry import run

            result = run(cfg, dist, main_log=this_run.log_path)
        else:
            from asrtrain.train.trainer import train as run_training

            result = run_training(cfg)
        if result is not None and getattr(result, "final_path", None) is not None:
            click.echo(f"final model: {result.final_path}")
