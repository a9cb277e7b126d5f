# Site settings of this recipe go here (before the shared part), e.g. extra PATH entries.
. "$(dirname "${BASH_SOURCE[0]}")/../utils/env.sh"
