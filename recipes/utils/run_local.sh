#!/usr/bin/env bash
# Run a command on this machine, its output into LOG (Kaldi's run.pl, for one job).
#   run_local.sh [--nproc N] [--time T] LOG CMD...   (--nproc / --time accepted and ignored)
while [[ "${1:-}" == --* ]]; do shift 2; done
log=$1; shift
mkdir -p "$(dirname "$log")"
{ echo "# $*"; echo "# started $(date -Is) on $(hostname)"; } > "$log"
"$@" 2>&1 | tee -a "$log"
status=${PIPESTATUS[0]}
echo "# ended $(date -Is), exit status $status" >> "$log"
exit "$status"
