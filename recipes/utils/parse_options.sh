#!/usr/bin/env bash
# Kaldi-style option parsing, sourced by a recipe after it sets its default variables:
#   --foo-bar VALUE  sets foo_bar=VALUE (the variable must already exist: typos are errors)
#   --foo-bar=VALUE  the same
#   --config FILE    sources FILE (shell assignments), before later options are applied
#   --help / -h      prints the recipe's $help_message and the current values, exits 0
# Positional arguments remain in "$@"; the names set on the command line are listed in
# $given_options (so a recipe can tell an explicit --stage from its default).

given_options=${given_options:-}

while true; do
  [ -z "${1:-}" ] && break
  case "$1" in
    --help|-h)
      printf '%s\n\nOptions (current values):\n' "${help_message:-}"
      # the variables of the recipe (and of the template, hybrid.sh: it sets HELP_FILES)
      grep -ohE '^[a-z_][a-z0-9_]*=' "${HELP_FILES[@]:-$0}" | tr -d '=' | sort -u | while read -r v; do
        if declare -p "$v" >/dev/null 2>&1; then printf '  --%s %s\n' "${v//_/-}" "${!v-}"; fi
      done
      if [ -n "${HELP_FILES:-}" ]; then
        printf '\nAn empty value leaves the option to asrtrain'"'"'s default (asrtrain COMMAND --help).\n'
      fi
      exit 0 ;;
    --*=*)
      opt=${1%%=*}; val=${1#*=}; set -- "$opt" "$val" "${@:2}"; continue ;;
    --config)
      [ $# -ge 2 ] || { echo "$0: --config needs a file" >&2; exit 2; }
      [ -f "$2" ] || { echo "$0: --config: no such file: $2" >&2; exit 2; }
      # shellcheck disable=SC1090
      . "$2"; shift 2 ;;
    --*)
      name=${1#--}; name=${name//-/_}
      if ! declare -p "$name" >/dev/null 2>&1; then
        echo "$0: unknown option $1 (no variable '$name' in the recipe)" >&2; exit 2
      fi
      [ $# -ge 2 ] || { echo "$0: option $1 needs a value" >&2; exit 2; }
      printf -v "$name" '%s' "$2"; given_options="$given_options $name"; shift 2 ;;
    *) break ;;
  esac
done
true
