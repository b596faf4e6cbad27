# Device call: 88c2486 (`w`: the dense walk on the tensor cores copies each next chunk's K into
# shared memory with cp.async; only `wide`'s decode_dense changes among the BENCH.md specs'
# default modules) against ed43dfd (`o`), both in one pack. The GPU suite of `w`; then `wide`
# dense at 32k, 128k and 1M on each build's untuned bundle (its dense rows are the tuned tile),
# o w o w.
PACK=.gpu/ab.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
S=$(cat .gpu/s/w/commit)
ENTKV_COMMIT=$S ph gpu-check-small 150 .gpu/s/w/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
for v in o w; do
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph create-$v 90 .gpu/s/$v/entkv bundle create --alpha 1.5 --head-dim 128 --group 4 --page-size 32 --kv-dtype bf16 --out /tmp/wide-$v
done
i=0
for v in o w o w; do
  i=$((i+1))
  ENTKV_COMMIT=$(cat .gpu/s/$v/commit) CUDA_CACHE_PATH=/tmp/jc-$v ph wide-$i-$v 90 .gpu/s/$v/entkv bench --bundle /tmp/wide-$v --no-defaults --workload wide --n 32768,131072,1048576 --methods dense --out $W/bench-wide-$i-$v.json
  snap
done
for f in $W/wide-*.log; do echo "== $f"; grep -E "^[0-9]+ +[a-z0-9()-]+ +(step|decode_dense) " $f | awk '{for(i=4;i<=NF;i++) if ($i ~ /^[0-9.]+\/[0-9.]+\/[0-9.]+$/) {print $1, $2, $3, $i; break}}'; done
