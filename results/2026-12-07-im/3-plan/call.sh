# Device call, any GPU: `wide`'s certified defaults planned for two CTAs an SM (6ba9c00; the PTX
# is f522f92's, only the host's split plan changes). Carries .gpu/im3.txz: old/ = f522f92, new/ =
# 6ba9c00.
# On an H200: the benchmark run behind docs/benchmarks.md at 6ba9c00 (scripts/bench-gpu.sh, then
# `gqa` and `wide` by scripts/bench-workloads.sh), then the GPU suite.
# On any other card: the default bundles at `wide` (`entkv bundle create`, no tuning),
# certified and certified-pruned at 32k, 128k and 1M, each float64-checked on sampled heads:
# old new old new, one process each; then `wide`'s certified family tuned alone at 32k (the
# length 2-default did not tune) at 6ba9c00.
PACK=.gpu/im3.txz BUILD=new; source scripts/device-call.sh
if grep -q H200 $W/nvidia-smi.txt; then
  cp -P .gpu/s/entkv .gpu/s/autotune .gpu/
  ph bench 200 bash scripts/bench-gpu.sh $W/bench
  snap
  ph workloads-gqa 150 bash scripts/bench-workloads.sh $W gqa
  snap
  ph workloads-wide 160 bash scripts/bench-workloads.sh $W wide
  snap
  ph gpu-check-small 80 .gpu/entkv gpu-check --small-only --out $W/gpu-check
  grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
  exit 0
fi
export CUDA_CACHE_PATH=/tmp/jc-plan
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --group 4"
for b in old new; do
  .gpu/s/$b/entkv bundle create --alpha 1.5 $WIDE --out $W/bundle-$b > $W/create-$b.log 2>&1
done
for r in o1:old n1:new o2:old n2:new; do
  b=${r##*:}
  ph_build $b bench-${r%%:*} 80 .gpu/s/$b/entkv bench --bundle $W/bundle-$b --no-defaults --workload wide --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-${r%%:*}.json
  grep -E "^wide " $W/bench-${r%%:*}.log
  snap
done
for b in old new; do find $W/bundle-$b -type f ! -name manifest.json -delete; done
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
ph tune-wide-32k 120 .gpu/s/new/autotune --alpha 1.5 $WIDE --contexts 32k --kernels decode_certified --time-budget 100 --no-cache --out $W/im-wide
grep -E "decode_certified" $W/tune-wide-32k.log | tail -2
find $W/im-wide -type f ! -name manifest.json ! -name "tune-*" -delete
