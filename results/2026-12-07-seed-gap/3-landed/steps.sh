# The landed rank cap's GPU steps (sourced after scripts/device-call.sh; `entkv` at .gpu/s): the
# GPU suite (--small-only), then `wide` certified at 128k on seven draws of 2-ab-more (see
# call.sh).
ph gpu-check-small 150 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
export CUDA_CACHE_PATH=/tmp/jc-rank
.gpu/s/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --group 4 --out $W/bundle > $W/create.log 2>&1 || echo "bundle failed"
for s in 13 14 15 16 17 26 46; do
  ph bench-$s 30 .gpu/s/entkv bench --bundle $W/bundle --no-defaults --workload wide --n 131072 --methods certified --iters 30 --check-samples 1 --data-seed $s --out $W/bench-$s.json
  grep -hE "^131072 +certified +step" $W/bench-$s.log | awk -v s=$s '{printf "seed %s %s\n", s, $5}'
done
find $W/bundle -type f ! -name manifest.json -delete
