# Device call, any GPU: the certified sketch sums on the integer tensor cores (`_im`, cc4fc98).
# Carries .gpu/im.txz (one build, cc4fc98). In order of value:
# 1. The GPU suite (--small-only): its certified checks now include `_im` tiles (full, pruned,
#    seeded with `_tc`), and every certified kernel's weights are the new signed bytes.
# 2. `wide`: the certified family tuned alone at 128k and 1M (--no-cache; the space has the
#    `_im` twins of its tensor-core points and `_im` at occupancy floors 3 and 4), then the
#    tuned bundle's certified and certified-pruned steps beside its default rows (interleaved,
#    float64-checked on sampled heads).
# 3. The same at `gqa`.
PACK=.gpu/im.txz; source scripts/device-call.sh
E=.gpu/s/entkv
export CUDA_CACHE_PATH=/tmp/jc-im
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
GQA="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"
ph gpu-check-small 120 $E gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "PASS" $W/gpu-check-small.log; grep -E "FAIL" $W/gpu-check-small.log | head -8
snap
ph tune-wide 170 .gpu/s/autotune --alpha 1.5 $WIDE --contexts 128k,1M --kernels decode_certified --time-budget 150 --no-cache --out $W/im-wide
grep -E "decode_certified" $W/tune-wide.log | tail -8
ph bench-wide 90 $E bench --bundle $W/im-wide --workload wide --n 131072,1048576 --methods certified,certified-pruned --out $W/bench-wide.json
grep -E "^wide " $W/bench-wide.log
snap
ph tune-gqa 120 .gpu/s/autotune --alpha 1.5 $GQA --contexts 128k,1M --kernels decode_certified --time-budget 100 --no-cache --out $W/im-gqa
ph bench-gqa 60 $E bench --bundle $W/im-gqa --workload gqa --n 131072,1048576 --methods certified,certified-pruned --out $W/bench-gqa.json
grep -E "^gqa " $W/bench-gqa.log
for d in $W/im-*; do find $d -type f ! -name manifest.json ! -name "tune-*" -delete; done
