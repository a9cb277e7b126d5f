# path.sh, one for every recipe (sourced by hybrid.sh and transcribe.sh): the project's venv
# first on PATH, one thread per process (jobs are processes; more threads per process only
# fight over the cores; the train stage unsets it so its learners share the host's cores). Site settings (extra PATH entries, a Kaldi tree) go here.
utils_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo_root=$(cd "$utils_dir/../.." && pwd)
[ -x "$repo_root/.venv/bin/asrtrain" ] && export PATH="$repo_root/.venv/bin:$PATH"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export PYTHONUNBUFFERED=1
command -v asrtrain >/dev/null || { echo "path.sh: asrtrain not found; run 'make install' in $repo_root" >&2; exit 1; }
