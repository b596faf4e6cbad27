# Device call: the untuned bundles' new defaults, A/B in one call. `o` = 9677c11 (before),
# `s` = the commit in .gpu/s/s/commit: `wide`'s certified full walk seeded by default (its
# page-pruned walk keeps the unseeded tile as a default row of its own) and `wide`'s sparse
# default looking its pages up a chunk ahead. 1) the GPU suite of `s` (--small-only); 2) the
# untuned `wide` bundle of each build (`entkv bundle create`), benched o s o s at 128k and 1M:
# top-k, Gaussian, certified and certified after page pruning (each step checked against
# float64 on sampled heads).
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 200 .gpu/s/s/entkv gpu-check --small-only --out $W/gpu-check
snap
for v in o s; do
  ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out /tmp/wide-$v
  cp /tmp/wide-$v/manifest.json $W/bundle-manifest-wide-$v.json
done
i=0
for v in o s o s; do
  i=$((i+1))
  export CUDA_CACHE_PATH=/tmp/jc-$v
  ph bench-$i-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/wide-$v --no-defaults --workload wide --n 131072,1048576 --methods topk,gaussian,certified,certified-pruned --out $W/bench-wide-$i-$v.json
  snap
done
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log
for f in $W/bench-*.log; do echo "== $f"; grep -E " step " $f | head -12; done
