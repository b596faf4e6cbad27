# The device-side id check's GPU steps (sourced after scripts/device-call.sh; `entkv` is
# .gpu/s/entkv, or BIN): the GPU suite with its `guard_ids` checks and `engine guard_ids` rows,
# then `paper`'s untuned bundle timed with the check off and on (dense, top-k, certified at 32k
# and 128k), alternating, ROUNDS times (default 2).
BIN=${BIN:-.gpu/s/entkv}
ph gpu-check-small 150 $BIN gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL |engine guard_ids" $W/gpu-check-small.log | head -12
snap
CUDA_CACHE_PATH=/tmp/jc-guard $BIN bundle create --alpha 1.5 --head-dim 32 --out $W/bundle-paper > $W/create-paper.log 2>&1 || echo "bundle failed"
for r in $(seq 1 ${ROUNDS:-2}); do
  for c in off on; do
    flag=""; [ $c = on ] && flag="--check-device-ids"
    CUDA_CACHE_PATH=/tmp/jc-guard ph bench-$c-$r 60 $BIN bench --bundle $W/bundle-paper --no-defaults --workload paper --n 32768,131072 --methods dense,topk,certified --iters 30 $flag --out $W/bench-$c-$r.json
    grep -E "^paper " $W/bench-$c-$r.log | head -8
  done
  snap
done
find $W/bundle-paper -type f ! -name manifest.json -delete
