# Device call: the candidate stream tightens its bounds once T candidates were appended since the
# last time, instead of after every chunk that appends (and once more before a split's final
# prune). o = ed43dfd (every appending chunk), g8 / g32 / g128 = 32ac4e3 with T = 8 / 32 / 128
# (32ac4e3 is T = 32; the others differ only in the constant). The GPU suite of g32; then dense,
# top-k and Gaussian on each build's untuned bundle at `paper`, `wide` and `gqa`, 32k / 128k /
# 1M, in the order o g8 g32 g128 g32 o.
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ENTKV_COMMIT=$(cat .gpu/s/g32/commit) ph gpu-check-small 120 .gpu/s/g32/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
spec_paper="--head-dim 32"; spec_wide="--head-dim 128 --group 4 --page-size 32 --kv-dtype bf16"; spec_gqa="--head-dim 32 --group 2 --kv-dtype bf16"
for v in o g8 g32 g128; do
  for w in paper wide gqa; do
    eval spec=\$spec_$w
    ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$w-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 $spec --out /tmp/$w-$v
  done
done
snap
i=0
for v in o g8 g32 g128 g32 o; do
  i=$((i+1))
  for w in paper wide gqa; do
    ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph $w-$i-$v 40 .gpu/s/$v/entkv bench --bundle /tmp/$w-$v --no-defaults --workload $w --n 32768,131072,1048576 --methods dense,topk,gaussian --out $W/bench-$w-$i-$v.json
  done
  snap
done
for f in $W/paper-*.log $W/wide-*.log $W/gqa-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z0-9()-]+ +(step|decode_dense|decode_sparse) " $f | awk '{for(i=4;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) {split($i,a,"/"); printf "%s %s %s %s\n", $1, $2, $3, a[1]; break}}'; done
