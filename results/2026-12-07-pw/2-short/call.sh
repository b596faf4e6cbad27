# Device call, any GPU, for a session with about five minutes of device time left: question 1 of
# 1-probe/call.sh on `wide` alone (the row `_seed_pw` should move most), 128k only.
PACK=.gpu/two.txz BUILD=main; source scripts/device-call.sh
E=.gpu/s/entkv
export CUDA_CACHE_PATH=/tmp/jc-pw
WIDE="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
ph tune-wide 100 .gpu/s/autotune --alpha 1.5 $WIDE --contexts 128k --kernels decode_certified --time-budget 80 --no-cache --out $W/pw-wide
ph bench-wide 40 $E bench --bundle $W/pw-wide --no-defaults --workload wide --n 131072 --methods certified,certified-pruned --out $W/bench-wide.json
find $W/pw-wide -type f ! -name manifest.json ! -name "tune-*" -delete
