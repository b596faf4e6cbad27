# Device call: dd1ea76 (`s`: the sparse FMA pass that looks its pages up ahead copies the first
# rows of the next chunk's K into shared memory with cp.async) against ed43dfd (`o`), both builds
# in one pack. The GPU suite of `s`; `paper` top-k and Gaussian at 32k, 128k and 1M, and `peaked`
# Gaussian and top-k at 128k and 1M, on each build's untuned bundle, alternated o s o s.
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
S=$(cat .gpu/s/s/commit)
ENTKV_COMMIT=$S ph gpu-check-small 150 .gpu/s/s/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
for v in o s; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 32 --out /tmp/paper-$v
done
i=0
for v in o s o s; do
  i=$((i+1))
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph paper-$i-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/paper-$v --no-defaults --workload paper --n 32768,131072,1048576 --methods topk,gaussian --out $W/bench-paper-$i-$v.json
  snap
done
for v in o s; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph peaked-$v 60 .gpu/s/$v/entkv bench --bundle /tmp/paper-$v --no-defaults --workload peaked --n 131072,1048576 --methods topk,gaussian --out $W/bench-peaked-$v.json
done
snap
for f in $W/paper-*.log $W/peaked-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z]+ +(step|decode)" $f | cut -c1-150; done
