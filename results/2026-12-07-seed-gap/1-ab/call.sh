# Device call, any GPU (an H100 will do: an A/B on one machine): the seed's rank cap at 128k over
# many input draws. Carries .gpu/rank.txz: cur/ = 3087808 (main: rank cap 4 below 4096 samples,
# so 4 at 128k), r6/ = ba7141d (exp/seed-rank6: SEED_LONG_SAMPLES 2048, so 6 at 128k). Only the
# seed estimate kernel differs. `wide`'s untuned default bundle of each build (its certified
# default is seeded), certified at 128k, float64-checked on a sampled head, 6 draws
# (`entkv bench --data-seed 7..12`), the builds alternating within each draw. A draw whose step
# repairs a pair should show as ~+60 us under cur (docs/perf-notes.md, "The seed's gap at
# 128k"). Then the GPU suite (--small-only) at r6, which landing it would need (~35 s).
PACK=.gpu/rank.txz BUILD=r6; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-rank
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --group 4"
for b in cur r6; do
  .gpu/s/$b/entkv bundle create --alpha 1.5 $WIDE --out $W/bundle-$b > $W/create-$b.log 2>&1 || echo "bundle $b failed"
done
for s in 7 8 9 10 11 12; do
  for b in cur r6; do
    ph_build $b bench-$b-$s 30 .gpu/s/$b/entkv bench --bundle $W/bundle-$b --no-defaults --workload wide --n 131072 --methods certified --iters 30 --check-samples 1 --data-seed $s --out $W/bench-$b-$s.json
    grep -E "^wide " $W/bench-$b-$s.log | head -2
  done
  snap
done
ph gpu-check-small 100 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
for b in cur r6; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
