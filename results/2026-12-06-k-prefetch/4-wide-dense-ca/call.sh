# Device call, after 3-wide-dense found 88c2486 1.5-1.7x slower: the same with 16-byte copies
# cached in L1 (`cp.async.ca` instead of `.cg`; `wca`, uncommitted) against ed43dfd (`o`).
# A lane's four 16-byte pieces of a row quarter lie in one 64-byte run, and each copy
# instruction of a warp takes one piece of each lane: with `.cg` every instruction fetches
# 32 half-used sectors from L2, where the old `ld.global.nc` found the rest in L1.
# `wide` dense at 32k, 128k and 1M on each build's untuned bundle, o wca o wca.
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
for v in o wca; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$v 90 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 128 --group 4 --page-size 32 --kv-dtype bf16 --out /tmp/wide-$v
done
i=0
for v in o wca o wca; do
  i=$((i+1))
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph wide-$i-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/wide-$v --no-defaults --workload wide --n 32768,131072,1048576 --methods dense --out $W/bench-wide-$i-$v.json
  snap
done
for f in $W/wide-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z0-9()-]+ +(step|decode_dense) " $f | awk '{for(i=4;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) {print $1, $2, $3, $i; break}}'; done
