# Stage 0 of recipes/yesno (sourced by ../utils/hybrid.sh): data dirs, dict and LM text.
echo "=== stage $1: data dirs, dict and LM text from $yesno"
done_or_run data "$data" local/prepare_data.sh --num-train "$num_train" "$yesno" "$data"
