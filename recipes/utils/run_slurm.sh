#!/usr/bin/env bash
# Run a command as a SLURM job and wait for it (Kaldi's slurm.pl, for one job).
#   run_slurm.sh [--nproc N] [--time HH:MM:SS] LOG CMD...
# With --nproc N > 1 the command is launched with srun on N tasks (asrtrain reads SLURM_*).
# Site options (partition, account, GPUs) come from $slurm_opts, set in cmd.sh.
nproc=1; time_limit=04:00:00
while [[ "${1:-}" == --* ]]; do
  case "$1" in --nproc) nproc=$2 ;; --time) time_limit=$2 ;; esac; shift 2
done
log=$1; shift
mkdir -p "$(dirname "$log")"
# shellcheck disable=SC2086
exec sbatch --wait --output="$log" --ntasks="$nproc" --time="$time_limit" ${slurm_opts:-} \
  --wrap="srun $(printf '%q ' "$@")"
