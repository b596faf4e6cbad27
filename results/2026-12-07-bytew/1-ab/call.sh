# Device call, any GPU: byte weights for the 4-bit certified pass (branch exp/byte-weights: one
# build whose kernels take them when generated with ENTKV_EXP_BYTE_WEIGHTS=1; with 0 its PTX is
# main's, byte-identical). Carries .gpu/bw.txz.
# 1. The GPU suite (--small-only) with byte weights (its certified checks against float64).
# 2. Untuned default bundles of `paper` and `gqa`, generated both ways: certified and
#    certified-pruned at 32k, 128k and 1M, float64-checked on sampled heads, old new old new.
# 3. ncu of the certified pass at `gqa` 128k both ways: instructions, DRAM bytes, time.
PACK=.gpu/bw.txz; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-bw
E=.gpu/s/entkv
export ENTKV_EXP_BYTE_WEIGHTS=1
ph gpu-check-small 110 $E gpu-check --small-only --out $W/gpu-check
unset ENTKV_EXP_BYTE_WEIGHTS
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
declare -A SHAPE=([paper]="--head-dim 32" [gqa]="--head-dim 32 --group 2 --kv-dtype bf16")
for w in paper gqa; do
  for v in 0 1; do
    ENTKV_EXP_BYTE_WEIGHTS=$v $E bundle create --alpha 1.5 ${SHAPE[$w]} --out $W/bundle-$w-$v > $W/create-$w-$v.log 2>&1
  done
done
for r in o1:0 n1:1 o2:0 n2:1; do
  v=${r##*:}
  for w in paper gqa; do
    ph bench-$w-${r%%:*} 70 $E bench --bundle $W/bundle-$w-$v --no-defaults --workload $w --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-$w-${r%%:*}.json
    grep -E "^$w " $W/bench-$w-${r%%:*}.log
  done
  snap
done
NCU="ncu --clock-control none --print-units base --page raw --metrics smsp__inst_executed.sum,dram__bytes_read.sum,gpu__time_duration.sum,launch__registers_per_thread"
for v in 0 1; do
  ph ncu-gqa-$v 50 $NCU -k regex:^select_certified__ -c 1 $E bench --bundle $W/bundle-gqa-$v --no-defaults --workload gqa --n 131072 --methods certified --iters 1 --warmup 1 --check-samples 1
  grep -E "inst_executed.sum|dram__bytes_read.sum|registers_per_thread |duration.sum" $W/ncu-gqa-$v.log | head
done
for d in $W/bundle-*; do find $d -type f ! -name manifest.json -delete; done
