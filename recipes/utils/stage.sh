#!/usr/bin/env bash
# Stage bookkeeping for recipes, sourced by run.sh after parse_options.sh.
#   want_stage N   -> true when stage N is within [stage, stop_stage]
#   stage_forced   -> true when finished work must be redone: --force true, or an explicit
#                     --stage N on the command line ("restart from stage N")
#   done_or_run NAME MARKER_DIR CMD...
#                  runs CMD unless MARKER_DIR/.done.NAME exists and nothing forces it (then it
#                  says it skips); the marker is written only after CMD succeeds, so a killed
#                  stage reruns. A failure is reported with CMD's own exit status.

want_stage() { [ "$1" -ge "$stage" ] && [ "$1" -le "$stop_stage" ]; }

stage_forced() {
  [ "${force:-false}" = true ] || [[ " ${given_options:-} " == *" stage "* ]]
}

done_or_run() {
  local name=$1 dir=$2; shift 2
  local marker="$dir/.done.$name" rc
  if [ -f "$marker" ] && ! stage_forced; then
    echo "[$(date +%T)] $name: already complete ($marker), skipping"
    return 0
  fi
  rm -f "$marker"
  echo "[$(date +%T)] $name: $*"
  "$@" && rc=0 || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "[$(date +%T)] $name: FAILED (exit $rc)" >&2
    return "$rc"
  fi
  mkdir -p "$dir" && date -Is > "$marker"
}
