# cmd.sh, one for every recipe (sourced by hybrid.sh): how the heavy stages run, on this
# machine or through a scheduler. Site settings go here, or in the environment:
# cmd_backend=local|slurm, slurm_opts (partition, GPUs), slurm_align_opts.
# align_cmd starts each job of prepare align (its --job-cmd), and of prepare ivectors and
# prepare fmllr (hybrid.sh's adapt_job_cmd): empty keeps them processes of the command
# itself, on this machine; under slurm each is one srun task, on whatever node
# SLURM gives it (slurm_align_opts: partition, memory, time), reading the features from the
# shared filesystem and connecting back to this host. Inside an allocation (salloc/sbatch
# of the recipe) add --exact to slurm_align_opts so the tasks share its nodes.
cmd_backend=${cmd_backend:-local}
case "$cmd_backend" in
  local) train_cmd="../utils/run_local.sh"; decode_cmd="../utils/run_local.sh"; align_cmd="" ;;
  slurm) train_cmd="../utils/run_slurm.sh"; decode_cmd="../utils/run_slurm.sh"
         export slurm_opts=${slurm_opts:-"--partition=gpu --gres=gpu:4 --cpus-per-task=8"}
         slurm_align_opts=${slurm_align_opts:-"--time=12:00:00"}
         align_cmd="srun --ntasks=1 --nodes=1 --cpus-per-task=1 $slurm_align_opts" ;;
  *) echo "cmd.sh: unknown cmd_backend '$cmd_backend' (local|slurm)" >&2; exit 2 ;;
esac
