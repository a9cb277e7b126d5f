# How a recipe runs its jobs (sourced by its cmd.sh): on this machine or through a scheduler.
# Set cmd_backend=slurm (and slurm_opts) to send the heavy stages to SLURM.
cmd_backend=${cmd_backend:-local}
case "$cmd_backend" in
  local) train_cmd="../utils/run_local.sh"; decode_cmd="../utils/run_local.sh" ;;
  slurm) train_cmd="../utils/run_slurm.sh"; decode_cmd="../utils/run_slurm.sh"
         export slurm_opts=${slurm_opts:-"--partition=gpu --gres=gpu:4 --cpus-per-task=8"} ;;
  *) echo "cmd.sh: unknown cmd_backend '$cmd_backend' (local|slurm)" >&2; exit 2 ;;
esac
