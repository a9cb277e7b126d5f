#!/usr/bin/env bash
# A Kaldi data dir of one LibriSpeech part from lhotse's manifests, usable without ffmpeg or Kaldi.
#   local/kaldi_export.sh MANIFEST_DIR PART OUT_DIR
#
# `lhotse kaldi export` writes text, utt2spk, segments, wav.scp, utt2dur, reco2dur, utt2lang
# (sorted, speaker = LibriSpeech reader id). Two things are changed afterwards:
#   - wav.scp: lhotse turns every FLAC into a pipe
#       ID ffmpeg -threads 1 -i FILE.flac -ar 16000 -map_channel 0.0.0  -f wav -threads 1 pipe:1 |
#     which needs ffmpeg (and an ffmpeg that still has -map_channel, removed in ffmpeg 7).
#     LibriSpeech is 16 kHz mono already, so the pipe changes nothing: the entry becomes the
#     FLAC path itself, which asrtrain reads directly (libsndfile). lhotse's own file is kept
#     as wav.scp.lhotse.
#   - spk2utt: lhotse leaves it to Kaldi's utt2spk_to_spk2utt.pl; it is made here.
set -euo pipefail
[ $# -eq 3 ] || { echo "Usage: $0 MANIFEST_DIR PART OUT_DIR" >&2; exit 2; }
manifests=$1 part=$2 out=$3
recordings=$manifests/librispeech_recordings_$part.jsonl.gz
supervisions=$manifests/librispeech_supervisions_$part.jsonl.gz
for f in "$recordings" "$supervisions"; do
  [ -f "$f" ] || { echo "$0: no $f (lhotse prepare librispeech -p $part did not run?)" >&2; exit 1; }
done
rm -rf "$out"
lhotse kaldi export "$recordings" "$supervisions" "$out" >/dev/null

mv "$out/wav.scp" "$out/wav.scp.lhotse"
sed -E 's#^([^ ]+) ffmpeg -threads 1 -i (.+) -ar [0-9]+ -map_channel 0\.0\.0 +-f wav -threads 1 pipe:1 \|$#\1 \2#' \
  "$out/wav.scp.lhotse" > "$out/wav.scp"
if grep -q 'ffmpeg' "$out/wav.scp" && ! command -v ffmpeg >/dev/null; then
  echo "$0: $out/wav.scp has ffmpeg pipes this script does not know how to undo, and ffmpeg" \
       "is not installed:" >&2
  grep -m1 ffmpeg "$out/wav.scp" >&2
  exit 1
fi
awk '{ if ($2 != spk) { if (NR > 1) printf "\n"; printf "%s", $2; spk = $2 } printf " %s", $1 }
     END { if (NR) printf "\n" }' "$out/utt2spk" > "$out/spk2utt"
echo "$part -> $out: $(wc -l < "$out/utt2spk") utterances, $(wc -l < "$out/spk2utt") speakers"
