# Device call at 4710da8 (seeded certified tiles hold the full walk's kernels only): the GPU
# suite; then on an H200 the tuned benchmark run behind docs/benchmarks.md (scripts/bench-gpu.sh:
# `paper` autotuned, paper, peaked, sweep, SDPA), then `gqa` and `wide` autotuned and benched
# beside SDPA; on any other GPU the certified family tuned alone on `wide` at 32k, 128k and 1M
# (its seeded two-tokens-a-lane `_tc` points, rejected for their pruned pass's spill before,
# beside the one-token ones).
PACK=.gpu/x.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  export CUDA_CACHE_PATH=/tmp/jc-wide
  A="--head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4"
  ph tune-cert-wide 260 .gpu/s/autotune --alpha 1.5 $A --kernels decode_certified --contexts 32k,128k,1M --time-budget 220 --no-cache --out /tmp/ct-wide
  xz -9c /tmp/ct-wide/tune-log.jsonl > $W/tune-log-cert-wide.jsonl.xz; cp /tmp/ct-wide/manifest.json $W/bundle-manifest-cert-wide.json
  xz -dc $W/tune-log-cert-wide.jsonl.xz | python3 -c "
import json,sys
for l in sys.stdin:
    r=json.loads(l)
    if r['family']!='decode_certified' or '_tc' not in r['tile_tag'] or 'seed' not in r['tile_tag']: continue
    print(r['workload']['context'], r['stage'], r['status'], r['tile_tag'], r.get('median_us'), r.get('registers'), r.get('local_bytes'))"
  exit 0
fi
ph bench 230 bash scripts/bench-gpu.sh $W/bench
snap
export CUDA_CACHE_PATH=/tmp/jc2
ph autotune-gqa 90 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 50 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned --out $W/bench-gqa-tuned.json
ph sdpa-gqa 30 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-wide 125 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --time-budget 100 --no-cache --out /tmp/b-wide
cp /tmp/b-wide/manifest.json $W/bundle-manifest-wide-tuned.json; xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz
ph bench-wide 50 .gpu/s/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned --out $W/bench-wide-tuned.json
ph sdpa-wide 30 python3 scripts/sdpa_baseline.py --workload wide --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --n 32768 131072 1048576 --out $W/sdpa-wide.json
grep -hE "^[0-9]+ +[a-z()0-9-]+ +step " $W/bench-*-tuned.log 2>/dev/null | awk '{print $1,$2,$(NF-3),$NF}' | head -40; grep -h median $W/sdpa-*.log 2>/dev/null
