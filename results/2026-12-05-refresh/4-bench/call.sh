# Device call at f706c20 (kernels as f810567): on an H200 the GPU suite, then the benchmark run
# behind docs/benchmarks.md (scripts/bench-gpu.sh: `paper` autotuned, paper, peaked, sweep,
# SDPA), then `gqa` and `wide` autotuned and benched beside SDPA; on any other GPU nothing (the
# suite and the untuned wide bundle ran on an H100 in 3-bench).
PACK=.gpu/x.txz; source scripts/device-call.sh
cp .gpu/s/entkv .gpu/s/autotune .gpu/
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then echo "not an H200: nothing run"; exit 0; fi
ph gpu-check-small 120 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
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
