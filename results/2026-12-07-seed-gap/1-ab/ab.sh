# The rank-cap A/B's steps (sourced after scripts/device-call.sh with PACK=.gpu/rank.txz; see
# call.sh): `wide` certified at 128k under cur and r6 over data seeds 7..12, then the GPU suite
# (--small-only) at r6.
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
ph_build r6 gpu-check-r6 100 .gpu/s/r6/entkv gpu-check --small-only --out $W/gpu-check-r6
grep -E "^gpu-check:" $W/gpu-check-r6.log; grep -E " FAIL " $W/gpu-check-r6.log | head -8
for b in cur r6; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
