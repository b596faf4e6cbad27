# Device call, any GPU, the commit in nvidia-smi.txt (seed samples in runs of four only from
# 2048 samples a head, entkv_abi::seed::seed_run): the GPU suite (`entkv gpu-check
# --small-only`), then the certified family tuned for `gqa` at 32k and 128k (tune log kept) and
# that bundle's certified step against its defaults (`entkv bench`, iid keys).
PACK=.gpu/one.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
ph gpu-check-small 150 .gpu/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
gqa=(--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12)
export CUDA_CACHE_PATH=/tmp/jc-gqa
ph tune-gqa 120 .gpu/autotune --alpha 1.5 "${gqa[@]}" --contexts 32k,128k --kernels decode_certified --no-cache --out $W/b
xz -9c $W/b/tune-log.jsonl >$W/tune-log-gqa.jsonl.xz; cp $W/b/manifest.json $W/bundle-manifest-gqa.json
ph bench-gqa 90 .gpu/entkv bench --bundle $W/b --workload gqa --n 32768,131072 --methods certified --out $W/bench-gqa.json
rm -rf $W/b
grep -A6 "^family" $W/tune-gqa.log | head -8
