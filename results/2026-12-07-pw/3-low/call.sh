# Device call, any GPU, for a session with about eight minutes of device time left (the fifth
# session's, 2026-12-07): 1-probe/call.sh reordered so that a call cut short by the budget keeps
# the most. `wide` first (the row `_seed_pw` should move most: the tuner's A/B at 128k and 1M,
# then the tuned bundle's certified and certified-pruned steps), then the GPU suite at e4090bc
# (its `_pw` cases have not run on a GPU), then `gqa` at 128k.
PACK=.gpu/two.txz BUILD=main; source scripts/device-call.sh
E=.gpu/s/entkv
export CUDA_CACHE_PATH=/tmp/jc-pw
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
GQA="--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12"
ph tune-wide 120 .gpu/s/autotune --alpha 1.5 $WIDE --contexts 128k,1M --kernels decode_certified --time-budget 100 --no-cache --out $W/pw-wide
ph bench-wide 60 $E bench --bundle $W/pw-wide --no-defaults --workload wide --n 131072,1048576 --methods certified,certified-pruned --out $W/bench-wide.json
snap
ph gpu-check-small 90 $E gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
snap
ph tune-gqa 80 .gpu/s/autotune --alpha 1.5 $GQA --contexts 128k --kernels decode_certified --time-budget 60 --no-cache --out $W/pw-gqa
for d in $W/pw-*; do find $d -type f ! -name manifest.json ! -name "tune-*" -delete; done
