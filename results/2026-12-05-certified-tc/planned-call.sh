# Planned device call (not run: no H200 could be started before the session's device time ran out), at ab32c7a on the H200:
# `wide` autotuned (with `_tc` on its certified grid) and benched beside SDPA, every method, for
# docs/benchmarks.md's `wide` section; then the untuned `wide` bundle's certified steps (the new
# default).
PACK=.gpu/x.txz; source scripts/device-call.sh
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-wide 125 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --time-budget 100 --no-cache --out /tmp/b-wide
cp /tmp/b-wide/manifest.json $W/bundle-manifest-wide-tuned.json; xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz
ph bench-wide 50 .gpu/s/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned --out $W/bench-wide-tuned.json
ph sdpa-wide 30 python3 scripts/sdpa_baseline.py --workload wide --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --n 32768 131072 1048576 --out $W/sdpa-wide.json
ph create-wide 30 .gpu/s/entkv bundle create --alpha 1.5 --head-dim 128 --page-size 32 --group 4 --kv-dtype bf16 --out /tmp/wide
ph bench-wide-untuned 40 .gpu/s/entkv bench --bundle /tmp/wide --no-defaults --workload wide --n 32768,131072,1048576 --methods certified,certified-pruned --out $W/bench-wide-untuned.json
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-*.log 2>/dev/null | awk '{print $1,$2,$(NF-3),$NF}' | head -40; grep -h median $W/sdpa-*.log 2>/dev/null | head
