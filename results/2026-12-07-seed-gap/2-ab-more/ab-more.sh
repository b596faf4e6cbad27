# The rank-cap A/B over more draws (sourced after scripts/device-call.sh with
# PACK=.gpu/rank.txz): 1-ab's six draws left the mean undecided (one draw under cur repaired,
# +80 us), so this counts how often cur's step repairs: `wide` certified at 128k under cur and
# r6 over data seeds $SEEDS (default 13..52), the builds alternating within each draw. No suite
# (1-ab ran it at r6).
export CUDA_CACHE_PATH=/tmp/jc-rank
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --group 4"
for b in cur r6; do
  .gpu/s/$b/entkv bundle create --alpha 1.5 $WIDE --out $W/bundle-$b > $W/create-$b.log 2>&1 || echo "bundle $b failed"
done
for s in ${SEEDS:-$(seq 13 52)}; do
  for b in cur r6; do
    ph_build $b bench-$b-$s 30 .gpu/s/$b/entkv bench --bundle $W/bundle-$b --no-defaults --workload wide --n 131072 --methods certified --iters 30 --check-samples 1 --data-seed $s --out $W/bench-$b-$s.json
  done
  grep -hE "^131072 +certified +step" $W/bench-cur-$s.log $W/bench-r6-$s.log | awk -v s=$s '{printf "seed %s %s\n", s, $5}' | paste -sd' '
  snap
done
for b in cur r6; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
