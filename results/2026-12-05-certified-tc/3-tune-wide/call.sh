# Device call at the commit in nvidia-smi.txt: the certified family tuned alone on `wide` with
# one-token-a-lane tensor-core points in the grid, then its bundle's certified steps against the
# untuned defaults (checked against float64).
PACK=.gpu/x.txz; source scripts/device-call.sh
export CUDA_CACHE_PATH=/tmp/jc-wide
A="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
ph tune-cert-wide 200 .gpu/s/autotune --alpha 1.5 $A --kernels decode_certified --contexts 32k,128k,1M --time-budget 160 --no-cache --out /tmp/ct-wide
xz -9c /tmp/ct-wide/tune-log.jsonl > $W/tune-log-cert-wide.jsonl.xz; cp /tmp/ct-wide/manifest.json $W/bundle-manifest-cert-wide.json
ph bench-wide 90 .gpu/s/entkv bench --bundle /tmp/ct-wide --workload wide --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-wide-cert.json
xz -dc $W/tune-log-cert-wide.jsonl.xz | python3 scripts/pair_times.py decode_certified _tc wide | grep -E "best|ratio" | head -40
grep -E " step |decode_certified " $W/bench-wide.log | head -20
