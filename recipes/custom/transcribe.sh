#!/usr/bin/env bash
# Transcribe new recordings with a model trained by run.sh: the same features, i-vector
# extractor, fMLLR model, graph and final.pt, at the LM weight and insertion penalty
# picked on dev.
#
#   ./transcribe.sh --data DIR --out DIR     # DIR: a Kaldi data dir (wav.scp, utt2spk;
#                                            # segments allowed; no text needed)
# Writes OUT/text (one line per utterance: id and words) and OUT/ctm (word times).
set -euo pipefail
cd "$(dirname "$0")"

help_message="Usage: $0 --data DIR --out DIR [--exp exp] [--data-root data] [--nj 2]"
data=
out=
exp=exp
data_root=data
nj=2

. ../utils/parse_options.sh
. ../utils/path.sh

die() { echo "$0: $*" >&2; exit 2; }
[ -n "$data" ] && [ -n "$out" ] || die "--data and --out are required ($help_message)"
[ -d "$data" ] || die "--data $data: not a directory"
model=$exp/blstm
for f in "$exp/features.sh" "$model/final.pt" "$data_root/lang/graph/HCLG.fst" \
         "$model/decode_dev/best_wer"; do
  [ -e "$f" ] || die "$f not found: train with run.sh first (stages 1 to 8)"
done
. "$exp/features.sh"
streams=fmllr,ivector,logmel fmllr_source=global   # what stage 5 used before it wrote streams.sh
if [ -f "$exp/streams.sh" ]; then . "$exp/streams.sh"; fi
has_stream() { [[ ",$streams," == *",$1,"* ]]; }
if has_stream fmllr && [ "$fmllr_source" = sat ]; then
  die "the model reads SAT fMLLR features (--fmllr-source sat): transcribe.sh does not run the GMM first pass yet"
fi
# the setting picked on dev: decode_dev/best_wer names wer_<lmwt> or wer_<lmwt>_<wip>
picked=$(awk '{print $NF}' "$model/decode_dev/best_wer"); picked=${picked##*wer_}
lmwt=${picked%%_*}; wip=0.0
if [ "$picked" != "$lmwt" ]; then wip=${picked#*_}; fi

work=$out/work
given() { local p v; for p in "$@"; do v=${p#*:}; [ -z "${!v}" ] || printf '%s\n' "${p%%:*}" "${!v}"; done; }
for type in mfcc logmel; do   # (an empty value in features.sh: the library's default)
  mapfile -t opts < <(given --dither:dither --sample-rate:sample_rate)
  opts+=(--type "$type" --nj "$nj")
  if [ "$type" = mfcc ]; then mapfile -t -O "${#opts[@]}" opts < <(given --num-bins:mfcc_bins)
  else opts+=(--num-bins 40 --deltas); fi
  asrtrain prepare features "$data" "$work/$type" "${opts[@]}"
done
stream_opts=()
if has_stream fmllr; then
  asrtrain prepare fmllr "$work/mfcc" "$work/fmllr" --model "$exp/fmllr/train"
  stream_opts+=(--stream fmllr="$work/fmllr/feats.scp")
fi
if has_stream ivector; then
  asrtrain prepare ivectors "$work/mfcc" "$work/ivectors" --extractor "$exp/ivectors/train/extractor" \
    --period "$ivector_period" --online
  stream_opts+=(--stream ivector="$work/ivectors/ivectors.scp" --ivector-period ivector="$ivector_period")
fi
if has_stream logmel; then
  stream_opts+=(--stream logmel="$work/logmel/feats.scp" --cmvn logmel="$work/logmel/cmvn.scp")
fi
mapfile -t chunk_opt < <(given --chunk:chunk)
mapfile -t search_opts < <(given --beam:beam --max-active:max_active)
asrtrain prepare archive "$work/archive.h5" "${chunk_opt[@]}" "${stream_opts[@]}" --utt2spk "$data/utt2spk"
asrtrain decode "$model/final.pt" "$data_root/lang/graph" "$work/archive.h5" "$work/decode" \
  --nj "$nj" --lmwt "$lmwt" --wip "$wip" "${search_opts[@]}"
name=$picked   # decode names outputs <lmwt> when the only penalty is 0
if awk -v w="$wip" 'BEGIN {exit !(w == 0)}'; then name=$lmwt; fi
cp "$work/decode/hyp/$name.txt" "$out/text"
cp "$work/decode/ctm/$name.ctm" "$out/ctm"
echo "$out/text: $(wc -l < "$out/text") utterances transcribed (LM weight $lmwt, penalty $wip, picked on dev)"
