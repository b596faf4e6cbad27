# Device call, after 1-ab found the prefetch slower on an H100: 0ccc093 (`r`: the chunk's global K
# loads issued before the wait on the rows copied ahead; two rows at `paper`'s tile) and
# 0ccc093 with a 16 KB budget (`r1`: one row) against ed43dfd (`o`), all three in one pack;
# `paper` top-k and Gaussian at 32k, 128k and 1M on each build's untuned bundle, o r r1 twice.
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
for v in o r r1; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$v 60 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 32 --out /tmp/paper-$v
done
i=0
for v in o r r1 o r r1; do
  i=$((i+1))
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph paper-$i-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/paper-$v --no-defaults --workload paper --n 32768,131072,1048576 --methods topk,gaussian --out $W/bench-paper-$i-$v.json
  snap
done
for f in $W/paper-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z0-9()-]+ +(step|decode_sparse) " $f | awk '{for(i=4;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) {print $1, $2, $3, $i; break}}'; done
