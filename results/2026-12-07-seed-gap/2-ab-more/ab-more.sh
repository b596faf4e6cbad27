# The rank-cap A/B over more draws (sourced after scripts/device-call.sh with
# PACK=.gpu/rank.txz): 1-ab's six draws left the mean undecided (one draw under cur repaired,
# +80 us), so this counts how often cur's step repairs: `wide` certified at 128k under each build
# of the pack (cur, r5 where the pack has it: exp/seed-rank5, the 5th largest from 2048 samples,
# and r6) over data seeds $SEEDS (default 13..52), the builds alternating within each draw. No
# suite (1-ab ran it at r6). N (default 131072) and the build r64 (exp/seed-rank6-64k) serve
# 4-ab-64k, the same A/B at 64k.
export CUDA_CACHE_PATH=/tmp/jc-rank
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --group 4"
BUILDS=$(for b in cur r5 r6 r64; do [ -f .gpu/s/$b/commit ] && echo $b; done)
for b in $BUILDS; do
  .gpu/s/$b/entkv bundle create --alpha 1.5 $WIDE --out $W/bundle-$b > $W/create-$b.log 2>&1 || echo "bundle $b failed"
done
for s in ${SEEDS:-$(seq 13 52)}; do
  for b in $BUILDS; do
    ph_build $b bench-$b-$s 30 .gpu/s/$b/entkv bench --bundle $W/bundle-$b --no-defaults --workload wide --n ${N:-131072} --methods certified --iters 30 --check-samples 1 --data-seed $s --out $W/bench-$b-$s.json
  done
  for b in $BUILDS; do grep -hE "^${N:-131072} +certified +step" $W/bench-$b-$s.log | awk -v s=$s -v b=$b '{printf "seed %s %s %s\n", s, b, $5}'; done | paste -sd' '
  snap
done
for b in $BUILDS; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
