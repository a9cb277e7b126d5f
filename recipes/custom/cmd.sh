# Site settings: cmd_backend=local|slurm and slurm_opts (see ../utils/cmd_backend.sh).
cmd_backend=${cmd_backend:-local}
. "$(dirname "${BASH_SOURCE[0]}")/../utils/cmd_backend.sh"
