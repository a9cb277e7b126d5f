#!/usr/bin/env bash
# What scripts/gpu_checks.sh needs on a lent GPU machine, packed into the 64 MB that travels there:
# the demo's training and dev archives cut to every speaker's every 5th+3rd utterance (40%) and
# every 2nd dev utterance (the demo's 144 MB train archive does not fit), xz-compressed, into
# .gpu/pack/; and the one Python package the machine's image lacks (kaldiio) as a wheel in .whl/.
# Both folders are git-ignored through .git/info/exclude. Run after the demo's stage 4.
#
#   scripts/gpu_pack.sh                  # then, on the device tool: carry [".gpu/pack", ".whl"] and run
#     python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl && \
#       PYTHONPATH=/tmp/site bash scripts/gpu_checks.sh .gpu/pack
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
r=recipes/synth
[ -f $r/data/archives/train.h5 ] || { echo "$r/data/archives/train.h5: missing (run the demo to stage 4)" >&2; exit 1; }
exclude=$(git rev-parse --git-dir)/info/exclude
mkdir -p "$(dirname "$exclude")"
for p in /.gpu/ /.whl/; do grep -qx "$p" "$exclude" 2>/dev/null || echo "$p" >> "$exclude"; done
rm -rf .gpu && mkdir -p .gpu/sub .gpu/pack
cd $r
for split in train dev; do
  pick='NR%2==1'
  [ $split = train ] && pick='NR%5==1||NR%5==3'
  awk "$pick{print \$1}" data/logmel/$split/feats.scp > "$root/.gpu/sub/$split.utts"
  sub=$root/.gpu/sub/$split
  mkdir -p "$sub"
  for name in fmllr:exp/fmllr/$split/feats.scp ivector:exp/ivectors/$split/ivectors.scp \
              logmel:data/logmel/$split/feats.scp ali:data/lang/pdf_ali/$split.scp; do
    awk 'NR==FNR{k[$1]=1;next} ($1 in k)' "$root/.gpu/sub/$split.utts" "${name#*:}" > "$sub/${name%%:*}.scp"
  done
  ../../.venv/bin/asrtrain prepare archive "$root/.gpu/$split.h5" --stream fmllr="$sub/fmllr.scp" \
    --stream ivector="$sub/ivector.scp" --ivector-period ivector=10 --stream logmel="$sub/logmel.scp" \
    --cmvn logmel=data/logmel/$split/cmvn.scp --utt2spk data/corpus/$split/utt2spk \
    --ali "$sub/ali.scp" --num-pdfs "$(cat data/lang/num_pdfs)"
  xz -T2 -6 -c "$root/.gpu/$split.h5" > "$root/.gpu/pack/$split.h5.xz"
  cp "$root/.gpu/$split.h5".{config.yaml,fingerprint.json} "$root/.gpu/pack/"
done
cd "$root"
.venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 -d .whl kaldiio
du -sh .gpu/pack .whl
