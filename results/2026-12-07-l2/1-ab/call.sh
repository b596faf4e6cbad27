# Device call, any GPU: the residual-norm bound of the 4-bit sketch at d >= 128 (branch l2-bound,
# 21546a5: norm words in the sketch, half-width min(L1, ||q'||_2 r)), against main (661f66b: `_im`
# defaults, L1 bound). Carries .gpu/ab.txz: old/ = 661f66b, new/ = 21546a5. As
# results/2026-12-07-im/8-l2/call.sh (which never got a machine to finish on):
# 1. The GPU suite (--small-only) at 21546a5: its page_meta checks build the norm words at
#    d = 128 (checked >= the float64 residual norm, no tolerance).
# 2. `wide`'s untuned default bundles, certified and certified-pruned at 32k, 128k and 1M, each
#    float64-checked on sampled heads: old new old new, one process each.
# 3. ncu of the new certified pass at 128k: DRAM bytes read (616.5 MB with the L1 bound,
#    results/2026-12-07-im/5-opcodes) and time.
PACK=.gpu/ab.txz BUILD=new; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-l2
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --group 4"
ph gpu-check-small 100 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
for b in old new; do
  .gpu/s/$b/entkv bundle create --alpha 1.5 $WIDE --out $W/bundle-$b > $W/create-$b.log 2>&1
done
for r in o1:old n1:new o2:old n2:new; do
  b=${r##*:}
  ph_build $b bench-${r%%:*} 80 .gpu/s/$b/entkv bench --bundle $W/bundle-$b --no-defaults --workload wide --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-${r%%:*}.json
  grep -E "^wide " $W/bench-${r%%:*}.log
  snap
done
NCU="ncu --clock-control none --print-units base --page raw --metrics smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,launch__registers_per_thread"
ph ops-new 60 $NCU -k regex:^select_certified__ -c 1 .gpu/s/new/entkv bench --bundle $W/bundle-new --no-defaults --workload wide --n 131072 --methods certified --iters 1 --warmup 1 --check-samples 1
grep -E "inst_executed.sum|dram__bytes_read.sum|registers_per_thread |duration.sum" $W/ops-new.log | head
for b in old new; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
