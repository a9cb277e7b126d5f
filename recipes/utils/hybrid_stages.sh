# The stages of the recipe template (hybrid.sh sources this file): hybrid_NAME runs stage NAME
# with its number as $1, reading the options and helpers hybrid.sh defined. A recipe replaces
# one by defining local_NAME before sourcing hybrid.sh.

hybrid_data() {
  . local/data.sh "$1"   # it says what it does (=== stage N: ...)
}

hybrid_features() {
  echo "=== stage $1: features (MFCC for alignment and adaptation, logmel + deltas for the network)"
  local split type n o=() t=() auto=false
  opts o --dither:dither --sample-rate:sample_rate --nj:feat_nj
  for split in $splits $train_copies; do
    for type in $feature_types; do
      t=(--num-bins 40 --deltas); if [ "$type" = mfcc ]; then opts t --num-bins:mfcc_bins; fi
      done_or_run "$type-$split" "$data/$type/$split" \
        asrtrain prepare features "$(split_dir "$split")" "$data/$type/$split" --type "$type" \
          "${t[@]}" "${o[@]}"
    done
  done
  for n in $(needed_sizes) streams fmllr_source; do if [ "${!n}" = auto ]; then auto=true; fi; done
  if [ "$auto" = true ]; then
    opts o --chunk:chunk
    asrtrain prepare sizes "$data/mfcc/train" --lm-text "$lm_text" "${o[@]}" > "$data/sizes.sh.tmp"
    mv "$data/sizes.sh.tmp" "$data/sizes.sh"
  fi
  mkdir -p "$exp"   # what transcribe.sh needs to treat new recordings as these were treated
  printf '%s\n' "sample_rate=$sample_rate" "dither=$dither" "mfcc_bins=$mfcc_bins" \
    "ivector_period=$ivector_period" "chunk=$chunk" "beam=$beam" "max_active=$max_active" \
    > "$exp/features.sh"
}

hybrid_align() {
  [ "$alignments" = learned ] || return 0
  echo "=== stage $1: alignments from nothing ($ali_stages: $ali_leaves leaves, $ali_gauss Gaussians) of train and ${ali_splits:-no other split}${train_copies:+, and the training copies $train_copies}"
  local s o=() split_opt=()
  for s in $ali_splits; do split_opt+=(--split "$s=$data/mfcc/$s"); done
  for s in $train_copies; do split_opt+=(--extra "$s=$data/mfcc/$s"); done
  # dev's and test's SAT fMLLR stream comes from the SAT rung's first pass (check_sat_source), never
  # from the aligner's transcript-free estimate: it is not written
  if [ -n "$ali_splits" ]; then split_opt+=(--no-held-out-sat-feats); fi
  opts o --mono-gauss:ali_mono_gauss --mono-iters:mono_iters --mono-utts:mono_utts \
    --leaves:ali_leaves --tree:ali_tree --gauss:ali_gauss --iters:ali_iters --max-lost:ali_max_lost --nj:ali_nj \
    --job-cmd:ali_job_cmd
  done_or_run align "$ali" \
    asrtrain prepare align "$dict" "$data/mfcc/train" "$ali" "${split_opt[@]}" --stages "$ali_stages" \
      "${o[@]}" "${align_opts[@]}"
}

hybrid_adapt() {
  local split o=() g=() j=()
  opts j --nj:adapt_nj --job-cmd:adapt_job_cmd
  if has_stream ivector; then
    echo "=== stage $1: i-vectors ($ivector_dim), estimated on train, applied to the other splits"
    opts o --ubm-components:ubm_components --dim:ivector_dim --iters:ivector_iters
    done_or_run ivectors-train "$exp/ivectors/train" \
      asrtrain prepare ivectors "$data/mfcc/train" "$exp/ivectors/train" "${o[@]}" \
        --period "$ivector_period" --online --seed "$seed" "${j[@]}"
    for split in ${splits#train} $train_copies; do
      done_or_run "ivectors-$split" "$exp/ivectors/$split" \
        asrtrain prepare ivectors "$data/mfcc/$split" "$exp/ivectors/$split" \
          --extractor "$exp/ivectors/train/extractor" --period "$ivector_period" --online "${j[@]}"
    done
  fi
  if has_stream fmllr && [ "$fmllr_source" = global ]; then
    echo "=== stage $1: fMLLR (40, LDA on the aligner's classes), estimated on train"
    opts g --gmm-components:fmllr_gmm_components
    done_or_run fmllr-train "$fmllr_dir/train" \
      asrtrain prepare fmllr "$data/mfcc/train" "$fmllr_dir/train" --ali "$fmllr_classes" "${g[@]}" \
        "${j[@]}"
    for split in ${splits#train} $train_copies; do
      done_or_run "fmllr-$split" "$fmllr_dir/$split" \
        asrtrain prepare fmllr "$data/mfcc/$split" "$fmllr_dir/$split" --model "$fmllr_dir/train" \
          "${j[@]}"
    done
  fi
}

lang_tree_opts() {   # lang_tree_opts ARRAY: prepare lang's LM order and the network's tree
  local -n _to=$1
  case "$hybrid_tree" in   # (opts sets the array anew)
    counts) opts "$1" --order:lm_order --num-pdfs:num_pdfs ;;
    aligner) opts "$1" --order:lm_order; _to+=(--tree "$ali/models/${ali_stages##*,}.pt") ;;
    questions) opts "$1" --order:lm_order; _to+=(--tree "$exp/tree/network.pt") ;;
    *) die "--hybrid-tree must be counts, aligner or questions" ;;
  esac
}

hybrid_lang() {
  local what="tree${num_pdfs:+ of ~$num_pdfs pdfs}"
  case "$hybrid_tree" in
    aligner) what="the ${ali_stages##*,} rung's tree" ;;
    questions) what="a question tree of ~$num_pdfs pdfs on the ${ali_stages##*,} rung" ;;
  esac
  echo "=== stage $1: lang (lexicon, ${lm_order:+$lm_order-gram }LM, $what, HCLG)"
  local rung graph split o=() adapt text_opt
  if [ "$hybrid_tree" != counts ] && [ "${ali_stages##*,}" = mono ]; then
    die "--hybrid-tree $hybrid_tree needs a context-dependent rung (--ali-stages ending in tri, lda or sat); the monophones' tree is --hybrid-tree counts"
  fi
  if [ "$hybrid_tree" = questions ]; then
    [ -n "$num_pdfs" ] || die "--hybrid-tree questions needs --num-pdfs (the network tree's leaves)"
    opts o --nj:ali_nj
    done_or_run tree "$exp/tree" \
      asrtrain prepare tree "$ali" "$exp/tree/network.pt" --leaves "$num_pdfs" "${o[@]}"
  fi
  lang_tree_opts o
  done_or_run lang "$lang" \
    asrtrain prepare lang "$dict" "$lm_text" "$ali" "$lang" "${o[@]}" "${lang_opts[@]}"
  [ -n "$gmm_rungs" ] || return 0
  echo "=== stage $1: GMM baselines ($gmm_rungs) on ${decode_splits}"
  opts o --beam:gmm_beam
  for rung in ${gmm_rungs//,/ }; do
    [ -f "$ali/models/$rung.pt" ] || die "no $ali/models/$rung.pt: --gmm-rungs must be among --ali-stages"
    case $rung in mono|tri) graph=$gmm/graph_$rung ;; *) graph=$gmm/graph_lda ;; esac   # SAT: LDA+MLLT's tree
    done_or_run "graph-$(basename "$graph")" "$graph" \
      asrtrain prepare gmm-graph "$lang" "$ali/models/$rung.pt" "$graph"
    for split in $decode_splits; do
      adapt=(); if [ "$rung" = sat ]; then adapt=(--first-pass "$gmm/decode_lda_$split"); fi
      text_opt=(); if has_text "$split"; then text_opt=(--text "$(text_of "$split")"); fi
      done_or_run "decode-$rung-$split" "$gmm/decode_${rung}_$split" \
        $decode_cmd "$gmm/decode_${rung}_$split/log/run.log" \
          asrtrain decode "$ali/models/$rung.pt" "$graph" "$data/mfcc/$split" "$gmm/decode_${rung}_$split" \
            "${text_opt[@]}" "${adapt[@]}" --nj "$decode_nj" --lattices --acwt "$gmm_acwt" \
            --lmwt "$gmm_lmwt" --wip "$wip" "${o[@]}" --max-active "$gmm_max_active" \
            --lattice-beam "$gmm_lattice_beam"
    done
  done
  if [ "$fmllr_source" = sat ] && has_stream fmllr; then   # the network's fMLLR stream
    for split in $decode_splits; do
      done_or_run "satfeats-$split" "$exp/fmllr_sat/$split" \
        asrtrain prepare fmllr-feats "$ali/models/sat.pt" "$data/mfcc/$split" "$exp/fmllr_sat/$split" \
          --transforms "$gmm/decode_sat_$split/trans.scp"
    done
  fi
}

stream_scp() {   # stream_scp NAME SPLIT: a recipe's own ${split}_${name}_scp (swbd: Kaldi's), else ours
  local v=${2}_${1}_scp
  if [ -n "${!v-}" ]; then echo "${!v}"; return; fi
  case "$1" in
    ivector) echo "$exp/ivectors/$2/ivectors.scp" ;;
    fmllr) if [ "$fmllr_source" = global ]; then echo "$fmllr_dir/$2/feats.scp"
           elif [ "$2" = train ] || in_list "$2" $train_copies; then echo "$ali/fmllr/$2/feats.scp"   # from transcripts
           else echo "$exp/fmllr_sat/$2/feats.scp"; fi ;;
    pdf_ali) if [ "$2" = train ] || in_list "$2" $ali_splits $train_copies; then echo "$lang/pdf_ali/$2.scp"; fi ;;
    logmel) echo "$data/logmel/$2/feats.scp" ;;
    cmvn) echo "$data/logmel/$2/cmvn.scp" ;;
    utt2spk) echo "$data/logmel/$2/utt2spk" ;;
  esac
}

table() {   # table NAME SPLIT: stream_scp, train's joined with its copies' (one table of their lines)
  local s files=() dir=$data/train_with_copies/$1 file=table.scp
  [ "$2" = train ] && [ -n "$train_copies" ] || { stream_scp "$1" "$2"; return; }
  # targets beside their tree_id, which the archive records; an input stream's parts named
  # beside it (parts.txt: export reads how each was computed)
  if [ "$1" = pdf_ali ]; then dir=$lang/pdf_ali file=train_with_copies.scp; fi
  for s in train $train_copies; do files+=("$(stream_scp "$1" "$s")"); done
  mkdir -p "$dir"; cat "${files[@]}" > "$dir/$file.tmp"; mv "$dir/$file.tmp" "$dir/$file"
  case "$1" in fmllr|ivector|logmel) readlink -f "${files[@]}" > "$dir/parts.txt" ;; esac
  echo "$dir/$file"
}

hybrid_archive() {
  echo "=== stage $1: HDF5 archives ($streams)"
  mkdir -p "$exp"; printf '%s\n' "streams=$streams" "fmllr_source=$fmllr_source" > "$exp/streams.sh"   # a record of the run's input
  local split s o=() targets pdfs first
  opts o --chunk:chunk
  for split in $splits; do
    s=()
    if has_stream fmllr; then s+=(--stream fmllr="$(table fmllr "$split")"); fi
    if has_stream ivector; then
      s+=(--stream ivector="$(table ivector "$split")" --ivector-period ivector="$ivector_period")
    fi
    if has_stream logmel; then
      s+=(--stream logmel="$(table logmel "$split")" --cmvn logmel="$(table cmvn "$split")")
    fi
    targets=()   # a split never aligned (test) has recordings, not targets
    if [ -n "$(stream_scp pdf_ali "$split")" ]; then
      pdfs=$num_pdfs; if [ -f "$lang/num_pdfs" ]; then pdfs=$(cat "$lang/num_pdfs"); fi
      targets=(--ali "$(table pdf_ali "$split")" --num-pdfs "$pdfs")
      # held out: an utterance the aligner missed is still decoded (its targets ignored)
      if [ "$split" != train ]; then targets+=(--unaligned keep); fi
    elif [ -n "$first_archives" ]; then   # realigned, no targets: the first network's archive as it is
      first=$first_archives; [[ $first = /* ]] || first=$PWD/$first
      mkdir -p "$archives"; ln -sfn "$first/$split.h5" "$archives/$split.h5"
      continue
    fi
    done_or_run "archive-$split" "$archives" \
      asrtrain prepare archive "$archives/$split.h5" "${o[@]}" "${s[@]}" \
        --utt2spk "$(table utt2spk "$split")" "${targets[@]}"
  done
}

hybrid_train() {
  local who="$strategy on $nproc learners"; if [ "$nproc" = 1 ]; then who="one learner"; fi
  echo "=== stage $1: train the BLSTM ($who)"
  train_network "$model" "$seed"
}

train_network() {   # DIR SEED: the network, trained as the options say, into DIR
  local o=()
  opts o --hidden:hidden --layers:layers --proj:proj --epochs:epochs --batch:batch \
    --base-batch:base_batch --lr:lr --warmup-epochs:warmup_epochs --anneal:anneal \
    --lr-schedule:lr_schedule --plateau-stop:plateau_stop --select:select --dropout:dropout \
    --spec-augment:spec_augment --label-smoothing:label_smoothing --context:context --optimizer:optimizer \
    --weight-decay:weight_decay --topology:topology
  local group_opt=()   # super-learners exist only in H-ADPSGD
  if [ "$strategy" = h-adpsgd ]; then group_opt=(--group-size "$group_size"); fi
  # path.sh pins one thread a process; the learners share the host's cores among themselves
  # (one learner on the 2 cores: 6,097 frames/s against 3,980 on one thread)
  done_or_run train "$1" \
    env -u OMP_NUM_THREADS $train_cmd --nproc "$nproc" "$1/log/run.log" \
      asrtrain train "$archives/train.h5" "$1" --valid "$archives/$valid_split.h5" \
        --seed "$2" "${o[@]}" \
        --strategy "$strategy" --nproc "$nproc" "${group_opt[@]}"
}

use_realigned() {   # the second network's dirs: what decode, score and export read from now on
  first_model=$model first_graph=$graph_dir first_archives=$archives   # decoded and scored beside it
  first_label="blstm on the ladder's alignments"
  if [ "$graph_dir" = "$lang/graph" ]; then graph_dir=${lang}_nnet/graph; fi
  lang=${lang}_nnet archives=${archives}_nnet model=${model}_nnet
}

hybrid_realign() {   # (stage train,realign) the trained network aligns train and dev again
  [ "$realign" = true ] || return 0
  echo "=== stage $1: the network realigns train and $ali_splits; a second network on those targets"
  local split a=() o=() first=$model
  for split in train $ali_splits; do a+=(--archive "$split=$archives/$split.h5"); done
  done_or_run realign "$exp/ali_nnet" \
    asrtrain prepare realign "$first/final.pt" "$lang" "$ali" "$exp/ali_nnet" "${a[@]}" \
      --nj "$ali_nj"
  lang_tree_opts o
  use_realigned
  done_or_run lang "$lang" \
    asrtrain prepare lang "$dict" "$lm_text" "$exp/ali_nnet" "$lang" "${o[@]}" "${lang_opts[@]}"
  hybrid_archive "$1"
  hybrid_train "$1"
}

use_lfmmi() {   # the lattice-free MMI network: what decode, score and export read from now on
  first_model=$model first_graph=$graph_dir first_archives=$archives first_label="blstm, cross-entropy only"
  model=${model}_lfmmi
}

hybrid_lfmmi() {   # (stage train,realign,lfmmi) the network trained further with lattice-free MMI
  [ "$lfmmi" = true ] || return 0
  local ce=$model; use_lfmmi
  echo "=== stage $1: lattice-free MMI, $lfmmi_epochs epochs from $ce/final.pt (denominator: the phone trigrams of $(den_of ali) on $lang's tree)"
  done_or_run den-graph "$(den_of den)" \
    asrtrain prepare den-graph "$lang" "$(den_of ali)" "$(den_of den)/den.npz"
  lfmmi_network "$ce" "$model"
}

den_of() {   # ali|den: the alignments the denominator is made of, or its dir (the realigned ones with --realign true)
  case $1 in ali) if [ "$realign" = true ]; then echo "$exp/ali_nnet"; else echo "$ali"; fi ;;
             den) if [ "$realign" = true ]; then echo "$exp/den_nnet"; else echo "$exp/den"; fi ;; esac
}

lfmmi_network() {   # CE_DIR DIR: CE_DIR's network, lfmmi_epochs of lattice-free MMI against the den graph, into DIR
  local o=() den; den=$(den_of den)
  opts o --epochs:lfmmi_epochs --lr:lfmmi_lr --utts-per-step:lfmmi_utts_per_step
  done_or_run lfmmi "$2" \
    env -u OMP_NUM_THREADS $train_cmd --nproc "$lfmmi_nproc" "$2/log/run.log" \
      asrtrain train-seq "$1/final.pt" "$archives/train.h5" "$den/den.npz" "$2" \
        --valid "$archives/dev.h5" --nproc "$lfmmi_nproc" "${o[@]}"
}

member_dir() {   # K: network K of the ensemble (K >= 2): <model>_m<K>, then _lfmmi when it has LF-MMI
  local dir=${model%_lfmmi}_m$1
  if [ "$lfmmi" = true ]; then dir=${dir}_lfmmi; fi
  echo "$dir"
}

hybrid_members() {   # (stage train,realign,lfmmi,members) more networks, each as the first, other seeds
  asks members || return 0
  local k dir
  for ((k = 2; k <= members; k++)); do
    dir=$(member_dir $k)
    echo "=== stage $1: network $k of $members (seed $((seed + k - 1))), as the first, into $dir"
    train_network "${dir%_lfmmi}" $((seed + k - 1))
    if [ "$lfmmi" = true ]; then lfmmi_network "${dir%_lfmmi}" "$dir"; fi
  done
  use_ensemble
}

use_ensemble() {   # the ensemble: what decode, score and export read from now on; the first network beside it
  ensemble_nets=("$model/final.pt")
  local k; for ((k = 2; k <= members; k++)); do ensemble_nets+=("$(member_dir $k)/final.pt"); done
  first_model=$model first_graph=$graph_dir first_archives=$archives
  first_label="one network (${model##*/}, seed $seed)"
  model=$exp/ensemble
}

network_args() {   # DIR ARRAY: ARRAY = the final.pt to decode or export DIR with, then --ensemble NET...
  local -n _args=$2
  if [ "$1" = "$exp/ensemble" ]; then
    _args=("${ensemble_nets[0]}"); local n
    for n in "${ensemble_nets[@]:1}"; do _args+=(--ensemble "$n"); done
  else
    _args=("$1/final.pt")
  fi
}

hybrid_decode() {
  echo "=== stage $1: decode $decode_splits (LM weights $lmwt, penalties $wip)"
  if [ -n "$first_model" ]; then   # --realign or --lfmmi true: the network before it too, to compare
    decode_network "$first_model" "$first_graph" "$first_archives"
  fi
  decode_network "$model" "$graph_dir" "$archives"
}

decode_network() {   # MODEL_DIR GRAPH ARCHIVES: decode_splits into MODEL_DIR/decode_<split>
  local m=$1 g=$2 ar=$3 split o=() text_opt net
  opts o --acwt:acwt --wip:wip --beam:beam --max-active:max_active
  network_args "$m" net
  for split in $decode_splits; do
    text_opt=()
    if has_text "$split"; then text_opt=(--text "$(text_of "$split")"); fi
    done_or_run "decode-$split" "$m/decode_$split" \
      $decode_cmd "$m/decode_$split/log/run.log" \
        asrtrain decode "${net[0]}" "$g" "$ar/$split.h5" "$m/decode_$split" \
          "${text_opt[@]}" --nj "$decode_nj" --lmwt "$lmwt" "${o[@]}" "${lattice_opt[@]}" \
          "${decode_opts[@]}" "${net[@]:1}"
  done
}

hybrid_score() {   # its report goes to $score_report, printed after the last stage
  echo "=== stage $1: score (the LM weight and insertion penalty picked on ${pick_split:-test, an oracle})"
  local t=$model/decode_$test_split rung picked file utt2spk=() vocab=()
  if [ -f "$(split_dir "$test_split")/utt2spk" ]; then utt2spk=(--utt2spk "$(split_dir "$test_split")/utt2spk"); fi
  # the test words the LM's text lacks (dev's lines left out: the lang dir's lm_words.txt; the
  # raw LM text for a lang dir made before that list existed), and their errors, in each report
  if [ -f "$lang/lm_words.txt" ]; then vocab=(--lm-text "$lang"); elif [ -f "$lm_text" ]; then vocab=(--lm-text "$lm_text"); fi
  if ! has_text "$test_split"; then   # transcribed, not scored
    asrtrain score --sweep "$model/decode_$pick_split"
    picked=$(awk '{print $NF}' "$model/decode_$pick_split/best_wer"); picked=${picked##*wer_}
    score_report="The test set has no text: its transcripts at the dev-picked setting ($picked) are
$t/hyp/$picked.txt"
    return 0
  fi
  for rung in ${gmm_rungs//,/ }; do   # Kaldi's RESULTS: a line per rung, before the network's
    asrtrain score --sweep "$gmm/decode_${rung}_$test_split" --pick-on "$gmm/decode_${rung}_$pick_split" \
      "${utt2spk[@]}" "${vocab[@]}" > "$gmm/score_$rung.log" 2>&1
    echo "$rung: $(head -1 "$gmm/decode_${rung}_$test_split/dev_picked_wer" | awk '{NF--; print}')"
  done
  if [ -n "$first_model" ] && [ -n "$pick_split" ]; then   # --realign or --lfmmi: the network before it
    asrtrain score --sweep "$first_model/decode_$test_split" --pick-on "$first_model/decode_$pick_split" \
      "${utt2spk[@]}" "${vocab[@]}" > "$first_model/score.log" 2>&1
    echo "$first_label: $(head -1 "$first_model/decode_$test_split/dev_picked_wer" | awk '{NF--; print}')"
  fi
  if [ -n "$pick_split" ]; then
    asrtrain score --sweep "$t" --pick-on "$model/decode_$pick_split" "${utt2spk[@]}" "${vocab[@]}"
    file=$t/dev_picked_wer title=$result_title
  else
    asrtrain score --sweep "$t" "${utt2spk[@]}" "${vocab[@]}"
    file=$t/best_wer title=$oracle_title
  fi
  picked=$(head -1 "$file" | awk '{print $NF}'); picked=${picked##*wer_}
  score_report=$(set -e; echo
    eval "echo \"$title\""
    sed -n '2,$p' "$file"
    cat "$t/score/$picked/summary.txt"
    head -1 "$file" | awk '{NF--; print}')   # its last line: the test WER
}

hybrid_export() {
  local pick=${pick_split:-$test_split} marker=$model/.done.export input first=() net nets=()
  network_args "$model" net
  for input in "${net[@]}"; do [ "$input" = --ensemble ] || nets+=("$input"); done
  if has_stream fmllr && [ "$fmllr_source" = sat ]; then   # the SAT first pass goes with it
    if [[ ",$gmm_rungs," != *",sat,"* ]]; then
      echo "=== stage $1: export skipped: the network reads SAT fMLLR features whose $pick speakers were adapted without a first pass (--gmm-rungs has no sat), which transcribe cannot do again"
      return 0
    fi
    first=(--first-pass "$gmm/decode_sat_$pick")
  fi
  echo "=== stage $1: export the BLSTM at the setting picked on ${pick_split:-test (an oracle)} to $export_dir"
  [ -f "$model/decode_$pick/best_wer" ] || die "no $model/decode_$pick/best_wer: run stage score first"
  # redone when the model, the decode it is picked on (stage score rescores it every run: its
  # marker stands for it) or another model's export is newer than the marker
  for input in "${nets[@]}" "$model/decode_$pick/.done.decode-$pick" "$export_dir/manifest.json"; do
    if [ ! -f "$input" ] || [ "$input" -nt "$marker" ]; then rm -f "$marker"; fi
  done
  done_or_run export "$model" \
    asrtrain export "${net[0]}" "$export_dir" --pick-on "$model/decode_$pick" --graph "$graph_dir" \
      "${first[@]}" "${net[@]:1}"
  echo "To transcribe with it: asrtrain transcribe $export_dir AUDIO... (docs/transcribing.md)"
}
