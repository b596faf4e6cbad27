# Device call at d4e1b8f: certified tensor-core rescoring with q's fragments in shared memory
# (r1 tiles at `wide` no longer spill).
# 1) the GPU suite (--small-only);
# 2) the certified family tuned alone on `wide` at 32k, 128k and 1M (the `_tc` points beside
#    their FMA twins), then `entkv bench` of that bundle's certified steps against the untuned
#    defaults (the `defaults ms` column), checked against float64.
PACK=.gpu/x.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
export CUDA_CACHE_PATH=/tmp/jc-wide
A="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
ph tune-cert-wide 260 .gpu/s/autotune --alpha 1.5 $A --kernels decode_certified --contexts 32k,128k,1M --time-budget 220 --no-cache --out /tmp/ct-wide
xz -9c /tmp/ct-wide/tune-log.jsonl > $W/tune-log-cert-wide.jsonl.xz; cp /tmp/ct-wide/manifest.json $W/bundle-manifest-cert-wide.json; snap
ph bench-wide 90 .gpu/s/entkv bench --bundle /tmp/ct-wide --workload wide --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-wide-cert.json
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log
xz -dc $W/tune-log-cert-wide.jsonl.xz | python3 scripts/pair_times.py decode_certified _tc wide | grep -E "best|ratio" | head -40
grep -E " step |certified " $W/bench-wide.log | head -20
