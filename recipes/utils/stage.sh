#!/usr/bin/env bash
# Stage bookkeeping for recipes, sourced by run.sh.
#   want_stage N   -> true when stage N is within [stage, stop_stage]
#   done_or_run NAME MARKER_DIR CMD...
#                  runs CMD unless MARKER_DIR/.done.NAME exists (then says it skips);
#                  the marker is written only after CMD succeeds, so a killed stage reruns.

want_stage() { [ "$1" -ge "$stage" ] && [ "$1" -le "$stop_stage" ]; }

done_or_run() {
  local name=$1 dir=$2; shift 2
  local marker="$dir/.done.$name"
  if [ -f "$marker" ] && [ "${force:-false}" != true ]; then
    echo "[$(date +%T)] $name: already complete ($marker), skipping"
    return 0
  fi
  echo "[$(date +%T)] $name: $*"
  "$@" || { echo "[$(date +%T)] $name: FAILED (exit $?)" >&2; return 1; }
  mkdir -p "$dir" && date -Is > "$marker"
}
