# The parts of recipes/swbd that read a Kaldi tree (sourced by run.sh before ../utils/hybrid.sh):
# the inputs checked, the transition-id map of a Kaldi graph (stage 3), scoring against the
# eval2000 STM in recording time (stage 7).

local_setup() {
  local v
  for v in train_fmllr_scp train_ivector_scp train_data_dir train_pdf_ali_scp dev_fmllr_scp \
           dev_ivector_scp dev_data_dir dev_pdf_ali_scp eval_fmllr_scp eval_ivector_scp \
           eval_data_dir num_pdfs graph_dir; do
    [ -n "${!v}" ] || die "--${v//_/-} is required (see the header of this script)"
  done
  train_dir=$train_data_dir dev_dir=$dev_data_dir eval_dir=$eval_data_dir
  if [ -z "$eval_text" ] && [ -f "$eval_data_dir/text" ]; then eval_text=$eval_data_dir/text; fi
  decode_splits=eval
  if [ -f "$data/graph_map/tid2pdf" ]; then decode_opts=(--tid2pdf "$data/graph_map/tid2pdf"); fi
}

tid2pdf() {  # tid2pdf OUT: 'transition-id pdf phone-id hmm-state' lines of $kaldi_mdl
  command -v show-transitions >/dev/null || { echo "$0: show-transitions (Kaldi) not on PATH" >&2; return 1; }
  # A Transition-state line gives the pdf ('pdf = P', or 'forward-pdf = F self-loop-pdf = S'
  # for non-HMM topologies); the self-loop transition-id then takes S, the others F.
  show-transitions "$kaldi_phones" "$kaldi_mdl" | awk -v phones="$kaldi_phones" '
    BEGIN { while ((getline l < phones) > 0) { split(l, f, " "); id[f[1]] = f[2] } }
    /^Transition-state/ {
      for (i = 1; i < NF; i++) {
        if ($i == "phone") ph = $(i + 2); else if ($i == "hmm-state") hs = $(i + 2)
        else if ($i == "pdf") fwd = loop = $(i + 2)
        else if ($i == "forward-pdf") fwd = $(i + 2); else if ($i == "self-loop-pdf") loop = $(i + 2)
      }
      if (!(ph in id)) { printf "show-transitions: phone %s is not in %s\n", ph, phones > "/dev/stderr"; exit 1 }
    }
    /^ *Transition-id = / { print $3, (/\[self-loop\]/ ? loop : fwd), id[ph], hs }' > "$1.tmp" || return 1
  [ -s "$1.tmp" ] || { echo "$0: show-transitions printed no transition-ids" >&2; return 1; }
  mv "$1.tmp" "$1"
}

local_graph() {
  [ -n "$kaldi_mdl" ] || return 0
  echo "=== stage $1: transition-id -> pdf map of the Kaldi graph ($kaldi_mdl)"
  mkdir -p "$data/graph_map"
  done_or_run graph-map "$data/graph_map" tid2pdf "$data/graph_map/tid2pdf"
  decode_opts=(--tid2pdf "$data/graph_map/tid2pdf")
}

to_recording_time() {  # CTM with utterance ids -> file, channel and times of the recordings
  local segs=$eval_data_dir/segments r2fc=$eval_data_dir/reco2file_and_channel
  if [ ! -f "$segs" ]; then cat "$1"; return; fi   # one recording per utterance: as it is
  awk -v segs="$segs" -v r2fc="$r2fc" '
    BEGIN { while ((getline l < segs) > 0) { split(l, f, " "); reco[f[1]] = f[2]; t0[f[1]] = f[3] }
            while ((getline l < r2fc) > 0) { split(l, f, " "); file[f[1]] = f[2]; chan[f[1]] = f[3] } }
    !($1 in reco) { printf "%s: utterance %s is not in %s\n", FILENAME, $1, segs > "/dev/stderr"; exit 1 }
    { r = reco[$1]; start = $3 + t0[$1]
      $1 = (r in file) ? file[r] : r; $2 = (r in chan) ? chan[r] : $2; $3 = sprintf("%.2f", start)
      print }' "$1"
}

local_score() {
  echo "=== stage $1: score (Hub5'00: sw_* = Switchboard, en_* = CallHome)"
  local decode=$model/decode_eval opts=() subsets sub scored ctm
  if [ -n "$eval_glm" ]; then opts+=(--glm "$eval_glm"); fi
  read -ra subsets <<< "$score_subsets"   # (read: no globbing of sw_*)
  for sub in "${subsets[@]}"; do opts+=(--subset "$sub"); done
  if [ -n "$eval_stm" ]; then
    # the decode's CTMs (utterance time) in recording time, then the sweep against the STM
    scored=$decode/scoring_stm
    rm -rf "$scored"; mkdir -p "$scored/hyp"
    for ctm in "$decode"/ctm/*.ctm; do
      to_recording_time "$ctm" > "$scored/hyp/$(basename "$ctm" .ctm).txt"
    done
    asrtrain score --sweep "$scored" --ref "$eval_stm" --hyp-format ctm "${opts[@]}"
    cp "$scored/best_wer" "$decode/best_wer"
  else
    asrtrain score --sweep "$decode" "${opts[@]}"
  fi
  cat "$decode/best_wer"
}
