# Stage 0 of recipes/custom (sourced by ../utils/hybrid.sh): dev held out of train when no
# --dev is given, the three dirs checked against each other, train speed-perturbed if asked
# (network: the 0.9 and 1.1 copies alone, a split of their own beside train).
echo "=== stage $1: data dirs (train $train, dev ${dev:-held out of train}, test $test)"
if [ -z "$dev" ]; then
  n=$dev_speakers
  if [ "$n" = auto ]; then
    s=$(awk '{print $2}' "$train/utt2spk" | sort -u | wc -l)
    [ "$s" -ge 2 ] || die "$train has $s speaker(s): give a dev set (--dev DIR)"
    n=$(( s / 15 )); [ "$n" -ge 1 ] || n=1; [ "$n" -le 10 ] || n=10
  fi
  done_or_run subset "$data/dev" \
    asrtrain prepare subset "$train" "$data/train" "$data/dev" --dev-speakers "$n"
fi
asrtrain prepare check-dirs --train "$base_train" --dev "$dev_dir" --test "$test"
if [ "$speed_perturb" = true ]; then
  done_or_run perturb "$train_dir" \
    asrtrain prepare perturb "$base_train" "$train_dir" --speeds 0.9,1.0,1.1
fi
if [ "$speed_perturb" = network ]; then
  done_or_run perturb "$sp_dir" \
    asrtrain prepare perturb "$base_train" "$sp_dir" --speeds 0.9,1.1
fi
