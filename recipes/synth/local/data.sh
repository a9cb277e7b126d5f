# Stage 0 of recipes/synth (sourced by ../utils/hybrid.sh): the corpus, spoken by espeak-ng with
# exact phone alignments (data/corpus: train, dev, test, dict, lm_text, phones.txt).
echo "=== stage $1: synthesize the corpus ($hours h, $speakers speakers)"
if [ -d "$corpus" ] && ! stage_forced; then
  echo "[$(date +%T)] corpus: already complete ($corpus), skipping"
else
  asrtrain prepare synth "$corpus" --hours "$hours" --speakers "$speakers" --seed "$seed" \
    --dev-speakers "$dev_speakers" --test-speakers "$test_speakers" --noise-snr "$noise_snr" \
    --max-repeats "$max_repeats" --lm-sentences "$lm_sentences" --nj "$synth_nj"
fi
