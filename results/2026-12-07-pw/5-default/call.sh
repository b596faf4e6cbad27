# Device call, any GPU: `wide`'s certified-pruned default made `_seed_pw` (the full walk's
# default seeded, at one token a lane). Carries .gpu/pw.txz: old/ = e4090bc (the pruned default
# unseeded), new/ = the commit of the change. In order:
# 1. The GPU suite (--small-only) at the new build: its certified checks run every spec's pruned
#    default on the page-pruned walk (`wide`'s now `_seed_pw`).
# 2. The default bundles at `wide` (`entkv bundle create`, no tuning), certified and
#    certified-pruned at 32k, 128k and 1M, each float64-checked on sampled heads: old new old new
#    in one process each, all in this call.
PACK=.gpu/pw.txz BUILD=new; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-def
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --group 4"
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
for b in old new; do
  .gpu/s/$b/entkv bundle create --alpha 1.5 $WIDE --out $W/bundle-$b > $W/create-$b.log 2>&1
done
for r in o1:old n1:new o2:old n2:new; do
  b=${r##*:}
  ph bench-${r%%:*} 80 .gpu/s/$b/entkv bench --bundle $W/bundle-$b --no-defaults --workload wide --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-${r%%:*}.json
  grep -E "^wide " $W/bench-${r%%:*}.log
  snap
done
for b in old new; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
