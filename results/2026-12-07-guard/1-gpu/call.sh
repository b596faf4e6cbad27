# Device call, any GPU (an H100 will do): the device-side id check (see the pack's commit) on the GPU, then
# its cost. Carries .gpu/guard.txz (scripts/pack-gpu.sh).
# 1. `entkv gpu-check --small-only`: the suite (its `guard_ids` checks against the host mirror
#    among them) and the `engine guard_ids <method>` rows: every method through the Decoder with
#    check_device_ids, ids outside the pool and a length past the plan written to the device
#    after planning (~60 s).
# 2. `paper`'s untuned bundle: dense, top-k and certified at 32k and 128k, with the check off and
#    on, twice each alternating (~4 × 35 s).
PACK=.gpu/guard.txz; source scripts/device-call.sh
ph gpu-check-small 150 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL |engine guard_ids" $W/gpu-check-small.log | head -12
snap
export CUDA_CACHE_PATH=/tmp/jc-guard
.gpu/s/entkv bundle create --alpha 1.5 --head-dim 32 --out $W/bundle > $W/create.log 2>&1 || echo "bundle failed"
for r in 1 2; do
  for c in off on; do
    flag=""; [ $c = on ] && flag="--check-device-ids"
    ph bench-$c-$r 60 .gpu/s/entkv bench --bundle $W/bundle --no-defaults --workload paper --n 32768,131072 --methods dense,topk,certified --iters 30 $flag --out $W/bench-$c-$r.json
    grep -E "^paper " $W/bench-$c-$r.log | head -8
  done
  snap
done
find $W/bundle -type f ! -name manifest.json -delete
