# decode's lattice options from a recipe's lattices=true|false and lattice_beam (sourced after
# parse_options.sh): lattice_opt is empty when the recipe decodes a pass per setting instead.
case "${lattices:-false}" in
  true) lattice_opt=(--lattices --lattice-beam "${lattice_beam:-8}") ;;
  false) lattice_opt=() ;;
  *) echo "--lattices must be true or false, got '$lattices'" >&2; exit 2 ;;
esac
