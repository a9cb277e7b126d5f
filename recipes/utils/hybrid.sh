#!/usr/bin/env bash
# The recipe template (ESPnet's egs2/TEMPLATE, icefall's prepare.sh): every stage of the hybrid
# BLSTM-HMM system from features to a score (their bodies: hybrid_stages.sh beside this file),
# and every default, once. A recipe's run.sh sets its own options, then sources this file last:
#
#   . "$(dirname "$0")/../utils/hybrid.sh"
#
# Stages (their numbers: $stages, one word a number, names joined by ',' share one):
#   data      local/data.sh, sourced: the corpus into Kaldi data dirs, a dict dir, an LM text
#   features  MFCC (alignment, adaptation) and logmel+deltas (the network) of every split;
#             sizes left at 'auto' from the corpus (asrtrain prepare sizes -> data/sizes.sh)
#   align     flat start mono -> tri -> LDA+MLLT -> SAT (alignments=learned)
#   adapt     i-vectors and fMLLR, estimated on train, applied to the other splits
#   lang      lexicon, LM, tree, HCLG; then the GMM rungs decoded (gmm_rungs)
#   archive   HDF5 archives of the network's streams (targets where a split is aligned)
#   train     the BLSTM, with a strategy, on nproc learners (realign, lfmmi, members: after it)
#   decode    the splits after train, one lattice search an utterance, the LM-weight grid
#   score     the test split at the setting picked on dev (an oracle without dev)
#   export    the BLSTM at that setting as one model dir, $exp/model (asrtrain export), which
#             asrtrain transcribe reads (with --fmllr-source sat, the GMM first pass too)
# The report of stage score is printed once every stage has run: the last line is the test WER.
# A recipe replaces a stage NAME (or adds one: swbd's graph) by defining local_NAME before
# sourcing this file, and adjusts names after its options are read with local_setup.
#
# Options: an empty value leaves the option to the library's default (asrtrain's --help says
# it: beam 13, max-active 7000, lattice beam 8, acoustic scale 0.1, dither 1, 16 kHz, ...);
# a size at 'auto' follows the corpus (recipes/custom's way). Any NAME below is --name VALUE on
# the command line or NAME=VALUE in a --config file. A finished step is skipped (and says so); an explicit
# --stage N restarts from stage N; --force true redoes everything in the stage range.
set -euo pipefail
HYBRID_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)   # before the cd: the stages live beside it
HELP_FILES=("$(cd "$(dirname "$0")" && pwd)/${0##*/}" "$HYBRID_DIR/hybrid.sh")
cd "$(dirname "$0")"

# --- run ---
stage=${stage-0}
stop_stage=${stop_stage-9}
force=${force-false}
data=${data-data}
exp=${exp-exp}
seed=${seed-0}
nj=${nj-2}                          # jobs of every stage whose own *_nj is empty
stages=${stages-"data features align adapt lang archive train,realign,lfmmi,members decode score export"}
splits=${splits-"train dev test"}   # dev picks the decoding setting; without it, an oracle
# splits the network trains on beside train and the ladder does not (speed-perturbed copies:
# recipes/custom --speed-perturb network); aligned by the last rung, in train's archive
train_copies=${train_copies-}
dict=${dict-}                       # empty: $data/dict
lm_text=${lm_text-}                 # empty: $data/lm_text
# --- features ---
feat_nj=${feat_nj-}
sample_rate=${sample_rate-}
dither=${dither-}
mfcc_bins=${mfcc_bins-}
feature_types=${feature_types-"mfcc logmel"}
# --- alignment (alignments=exact: the corpus brings them, in $ali) ---
alignments=${alignments-learned}
ali_stages=${ali_stages-mono,tri,lda,sat}
ali_splits=${ali_splits-dev}        # aligned with train (their archives get targets)
ali_mono_gauss=${ali_mono_gauss-}
ali_leaves=${ali_leaves-}
ali_tree=${ali_tree-}               # questions (Kaldi's likelihood tree) or counts; empty: prepare align's
ali_gauss=${ali_gauss-}
mono_iters=${mono_iters-}
mono_utts=${mono_utts-}
ali_iters=${ali_iters-}
ali_max_lost=${ali_max_lost-}
ali_nj=${ali_nj-}
ali_job_cmd=${ali_job_cmd-}         # starts each alignment job; empty: cmd.sh's align_cmd
# --- i-vectors and fMLLR ---
ubm_components=${ubm_components-}
ivector_dim=${ivector_dim-}
ivector_period=${ivector_period-10}
ivector_iters=${ivector_iters-}
fmllr_gmm_components=${fmllr_gmm_components-}
adapt_nj=${adapt_nj-}               # jobs of prepare ivectors / fmllr; empty: ali_nj
adapt_job_cmd=${adapt_job_cmd-}     # starts each of them (empty: ali_job_cmd; both empty: processes here)
# the network's fMLLR stream: global (prepare fmllr: a global GMM, no transcripts) or sat (the
# aligner's SAT model; dev/test transforms from the GMM first pass where gmm_rungs has sat)
fmllr_source=${fmllr_source-global}
# --- lang ---
lm_order=${lm_order-}
num_pdfs=${num_pdfs-}
# the network's pdfs: counts (a tree of ~num_pdfs grown from the alignments' frame counts),
# aligner (the tree of the last rung of ali_stages, as Kaldi's nnet recipes use the GMM's) or
# questions (a likelihood tree of ~num_pdfs grown on that rung: prepare tree, Kaldi's chain
# build_tree.sh); auto: the sizes rule's (questions below 20 h)
hybrid_tree=${hybrid_tree-counts}
graph_dir=${graph_dir-}             # empty: $lang/graph
# true: once trained, the network aligns train and dev again (prepare realign, Kaldi's nnet
# realignment) and a second network trains on those targets (on the same tree; a count tree
# is grown again from them); decode, score and export take the second (dirs ending in _nnet);
# the first is decoded too and scored on a line of its own before the second's report
realign=${realign-false}
# true: the trained network (the second, with --realign true) trains lfmmi_epochs more with
# lattice-free MMI (prepare den-graph + train-seq, Kaldi's chain denominator) into <model>_lfmmi,
# the model decode, score and export take; the cross-entropy one is decoded and scored beside it;
# auto: the sizes rule's (from 2 h of training speech)
lfmmi=${lfmmi-false}
lfmmi_epochs=${lfmmi_epochs-2}
lfmmi_lr=${lfmmi_lr-0.01}
lfmmi_utts_per_step=${lfmmi_utts_per_step-auto}   # the whole utterances of a step (auto: the sizes rule's)
lfmmi_nproc=${lfmmi_nproc-auto}   # train-seq's learners (auto: a GPU each, or a core each up to a step's utterances)
# N > 1: N - 1 more networks, each trained as the first (its LF-MMI too) from seeds seed+1...,
# into <model>_m<k>[_lfmmi]; decode, score and export take them as one (decode --ensemble: the
# frame-level mean of their scores) in $exp/ensemble, the first network decoded and scored beside
# it; auto: the sizes rule's (2 from 2 h to 20 h)
members=${members-1}
# --- GMM baselines (Kaldi's RESULTS rungs): a graph per tree, dev and test decoded with
# lattices, SAT in two passes (fMLLR from the LDA+MLLT pass); auto: every rung of ali_stages
gmm_rungs=${gmm_rungs-none}
gmm_acwt=${gmm_acwt-0.0833}
# the weights scored from each rung's lattices (one search for the grid: wide is cheap);
# speechocean762's SAT rung picked 27 on a dev whose sentences the LM had not read
gmm_lmwt=${gmm_lmwt-6:30}
gmm_beam=${gmm_beam-}
# our lattice determinization slows down more with the lattice beam than Kaldi's
# (speechocean762's monophones: 1.4 s for a 2.8 s utterance at max-active 2000 and lattice
# beam 4, 300 s at 7000 and 8)
gmm_max_active=${gmm_max_active-2000}
gmm_lattice_beam=${gmm_lattice_beam-4}
# --- archives and the network: streams (auto: the sizes rule's) of fmllr, ivector, logmel ---
streams=${streams-fmllr,ivector,logmel}
chunk=${chunk-}
hidden=${hidden-}
layers=${layers-}
proj=${proj-}
epochs=${epochs-}
batch=${batch-}
base_batch=${base_batch-}
lr=${lr-}
warmup_epochs=${warmup_epochs-}
anneal=${anneal-}
lr_schedule=${lr_schedule-}
plateau_stop=${plateau_stop-}       # with plateau: stop at a plateau after this many halvings (empty: never)
select=${select-}                   # final.pt: best (held-out loss), last, average:N
dropout=${dropout-}
spec_augment=${spec_augment-}
label_smoothing=${label_smoothing-} # train --label-smoothing (empty: train's default, none)
optimizer=${optimizer-}             # train --optimizer sgd|adam (empty: train's default, sgd)
weight_decay=${weight_decay-}       # train --weight-decay (empty: train's default, none)
context=${context-}                 # frames of each neighbouring chunk a chunk is trained and decoded with (train --context; empty: train's 0; auto: the sizes rule's)
strategy=${strategy-h-adpsgd}
nproc=${nproc-4}
group_size=${group_size-2}          # learners of a super-learner (h-adpsgd)
topology=${topology-}
valid_split=${valid_split-dev}      # the held-out loss (yesno: train, it has no dev)
# --- decoding: every LM weight and insertion penalty read off the lattices (lattices=false:
# a pass per setting), swept on dev and test, picked on dev ---
decode_nj=${decode_nj-}
acwt=${acwt-}
lmwt=${lmwt-4:20}
wip=${wip--1.0,-0.5,0.0,0.5,1.0}  # negative too: weak models on real speech delete (speechocean762: dev picked -1.0, docs/results.md)
lattices=${lattices-true}
lattice_beam=${lattice_beam-}
beam=${beam-}
max_active=${max_active-}
# --- export: the model dir asrtrain transcribe reads ---
export_dir=${export_dir-}           # empty: $exp/model

. ../utils/parse_options.sh
. ../utils/path.sh
. ../utils/cmd.sh
. ../utils/stage.sh

die() { echo "$0: $*" >&2; exit 2; }
# opts ARRAY FLAG:NAME...: ARRAY gets FLAG value for each NAME that is set (empty: the default)
opts() {
  local -n _into=$1; shift; _into=(); local p v
  for p in "$@"; do v=${p#*:}; [ -z "${!v}" ] || _into+=("${p%%:*}" "${!v}"); done
}
in_list() { [[ " ${*:2} " == *" $1 "* ]]; }
has_stream() { [[ ",$streams," == *",$1,"* ]]; }
split_dir() { local v=${1}_dir; echo "${!v:-$data/$1}"; }   # a split's Kaldi data dir
text_of() { local v=${1}_text; echo "${!v:-$(split_dir "$1")/text}"; }   # its reference
has_text() { [ -s "$(text_of "$1")" ]; }
case "$lattices" in true|false) ;; *) die "--lattices must be true or false, got '$lattices'" ;; esac
case "$fmllr_source" in global|sat|auto) ;; *) die "--fmllr-source must be global or sat" ;; esac
case "$alignments" in exact|learned) ;; *) die "--alignments must be exact or learned" ;; esac
case "$realign" in true|false) ;; *) die "--realign must be true or false, got '$realign'" ;; esac
case "$lfmmi" in true|false|auto) ;; *) die "--lfmmi must be true, false or auto, got '$lfmmi'" ;; esac
[[ "$members" =~ ^([1-9][0-9]*|auto)$ ]] || die "--members must be a count of networks (1 or more) or auto, got '$members'"
: "${feat_nj:=$nj}" "${decode_nj:=$nj}" "${ali_nj:=$nj}" "${ali_job_cmd:=$align_cmd}"
: "${adapt_nj:=$ali_nj}" "${adapt_job_cmd:=$ali_job_cmd}"

# where the stages write (a recipe's local_setup may rename any of them)
lang=$data/lang
ali=$exp/ali
archives=$data/archives
fmllr_dir=$exp/fmllr
model=$exp/blstm_$strategy
gmm=$exp/gmm
result_title='Test set at the dev-picked setting ($picked); the best on test is an oracle:'
oracle_title='Test set, best setting on test (oracle) ($picked), $strategy on $nproc learners:'
align_opts=()
lang_opts=()
decode_opts=()
if declare -F local_setup >/dev/null; then local_setup; fi
if [ "$realign" = true ] && [ -n "$train_copies" ]; then
  die "--realign true realigns train and dev only: not with training copies ($train_copies, --speed-perturb network)"
fi
: "${dict:=$data/dict}" "${lm_text:=$data/lm_text}" "${graph_dir:=$lang/graph}" "${export_dir:=$exp/model}"
fmllr_classes=${fmllr_classes:-$ali/train/pdf.scp}   # the LDA's classes: the aligner's pdfs
if [ "$gmm_rungs" = auto ]; then gmm_rungs=$ali_stages; elif [ "$gmm_rungs" = none ]; then gmm_rungs=; fi
test_split=${splits##* }
decode_splits=${decode_splits:-${splits#train }}
pick_split=; if in_list dev $decode_splits; then pick_split=dev; fi
lattice_opt=()
if [ "$lattices" = true ]; then opts lattice_opt --lattice-beam:lattice_beam; lattice_opt=(--lattices "${lattice_opt[@]}"); fi
declare -i stage_start=$SECONDS
took() { echo "[$(date +%T)] stage $1 took $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }

size_names="ali_mono_gauss ali_leaves ali_gauss num_pdfs hidden layers proj epochs batch base_batch lr lr_schedule
            ubm_components fmllr_gmm_components ivector_dim lm_order strategy nproc plateau_stop select
            hybrid_tree lfmmi context dropout spec_augment members"
lfmmi_sizes="lfmmi_utts_per_step lfmmi_nproc"   # the rule's too, needed only where lfmmi is not false
needed_sizes() { echo "$size_names"; [ "$lfmmi" = false ] || echo "$lfmmi_sizes"; }
hybrid_tree_asked=$hybrid_tree   # what the user passed (auto: the rule's, see apply_sizes)
apply_sizes() {   # sizes left at auto take the corpus' values (data/sizes.sh, from stage features)
  local name value
  if [ -f "$data/sizes.sh" ]; then
    while IFS='=' read -r name value; do
      case "$name" in \#*|'') continue ;; esac
      if [ "${!name-}" = auto ]; then printf -v "$name" '%s' "$value"; fi
    done < "$data/sizes.sh"
  fi
  # the rule's aligner/question trees need a context-dependent rung: a ladder that stops at
  # mono (--ali-stages mono) has none, so the rule's tree falls back to counts, said once
  if [ "$hybrid_tree_asked" = auto ] && [ "${ali_stages##*,}" = mono ] \
     && [ "$hybrid_tree" = aligner -o "$hybrid_tree" = questions ]; then
    echo "note: --ali-stages stops at mono, which has no context tree: the network's tree is grown from counts (--hybrid-tree counts) instead of the rule's '$hybrid_tree'"
    hybrid_tree=counts
  fi
}
check_sizes() {   # before a stage that reads them (the streams: from stage adapt on)
  local name
  for name in $(needed_sizes) ${1:+streams fmllr_source}; do
    [ "${!name}" != auto ] || die "--${name//_/-} is auto and $data/sizes.sh has no value for it: run stage 1"
  done
  for name in ${1:+${streams//,/ }}; do
    case "$name" in fmllr|ivector|logmel) ;; *) die "--streams: unknown stream '$name' (fmllr, ivector, logmel)" ;; esac
  done
  if [ -n "${1-}" ]; then check_sat_source; fi
}
check_sat_source() {   # the SAT stream's dev/test transforms come from the SAT rung's first pass
  if has_stream fmllr && [ "$fmllr_source" = sat ] && [[ ",$gmm_rungs," != *",sat,"* ]]; then
    die "the fMLLR stream from the SAT first pass (--fmllr-source sat) needs --gmm-rungs with lda,sat (or --fmllr-source global, or --streams logmel)"
  fi
}

. "$HYBRID_DIR/hybrid_stages.sh"   # hybrid_data ... hybrid_export

# the stages, in order; the score stage prints no timing (a recipe's local_score may end with
# its WER), and its report (the last line: the test WER) comes after every stage
apply_sizes
check_sat_source   # where both are known now; check_sizes checks again once the rule filled in auto
first_model= first_graph= first_archives= first_label=   # set by use_realigned / use_lfmmi / use_ensemble
ensemble_nets=()   # set by use_ensemble
asks() {   # STAGE: the options ask for the optional stage realign, lfmmi or members
  case $1 in members) [[ "$members" =~ ^[0-9]+$ ]] && [ "$members" -gt 1 ] ;; *) [ "${!1}" = true ] ;; esac
}
for _opt in realign lfmmi members; do   # a run resumed after such a stage reads the network it made
  if asks $_opt && [[ " ${stages//,/ } " != *" $_opt "* ]]; then
    die "--$_opt: this recipe's stages ($stages) have no $_opt"
  fi
done
declare -i _n=0
for _names in $stages; do   # in stage order: realign's network first, then lfmmi's on it
  if [ "$_n" -lt "$stage" ]; then
    for _opt in realign:use_realigned lfmmi:use_lfmmi members:use_ensemble; do   # each reads the one before's network
      if asks "${_opt%%:*}" && [[ ",$_names," == *",${_opt%%:*},"* ]]; then "${_opt#*:}"; fi
    done
  fi
  _n+=1
done
score_report=
declare -i _n=0
for _names in $stages; do
  if want_stage $_n; then
    for _name in ${_names//,/ }; do
      [ "$_name" != - ] || continue
      case "$_name" in align|lang) check_sizes ;; adapt|archive|train|realign|export) check_sizes streams ;; esac
      if declare -F "local_$_name" >/dev/null; then "local_$_name" $_n; else "hybrid_$_name" $_n; fi
      if [ "$_name" = features ]; then apply_sizes; fi
    done
    if [[ ",$_names," == *",score,"* ]]; then stage_start=$SECONDS; else took $_n; fi
  fi
  _n+=1
done
if [ -n "$score_report" ]; then printf '%s\n' "$score_report"; fi
