# Device call at f2a96fc: the page box sketch (page_bounds reads 4-bit min/max rows, 40 B a page
# and head instead of 128), the tuner timing the certified family in the pruned `peaked` step
# too, and head-bound sharing (`share_bound`, default on
# for wide rows): the runtime GPU test, the GPU suite (--small-only; it runs every certified
# interpreter check, both sharing choices on 4-bit specs), the engine/C ABI checks, then the tuned
# benchmark run behind docs/benchmarks.md (scripts/bench-gpu.sh: autotune, paper, peaked, sweep,
# SDPA), then `gqa` and `wide` tuned and benched beside SDPA. The tune logs time every bucket's
# certified default with sharing flipped (the A/B).
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
ph runtime-gpu 120 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 300 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
ph engine 240 bash scripts/engine-gpu.sh $W/engine
ph bench 300 bash scripts/bench-gpu.sh $W/bench
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-gqa 100 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 60 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-gqa-tuned.json
ph sdpa-gqa 30 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
snap
export CUDA_CACHE_PATH=/tmp/jc2
ph autotune-wide 150 .gpu/s/autotune --alpha 1.5 --head-dim 128 --page-size 32 --kv-dtype bf16 --q-heads 32 --kv-heads 8 --batch 4 --contexts 32k,128k,1M --time-budget 130 --out /tmp/b-wide
cp /tmp/b-wide/manifest.json $W/bundle-manifest-wide-tuned.json; xz -9c /tmp/b-wide/tune-log.jsonl > $W/tune-log-wide.jsonl.xz
ph bench-wide 60 .gpu/s/entkv bench --bundle /tmp/b-wide --no-defaults --workload wide --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-wide-tuned.json
ph sdpa-wide 30 python3 scripts/sdpa_baseline.py --workload wide --batch 4 --heads 32 --kv-heads 8 --head-dim 128 --n 32768 131072 1048576 --out $W/sdpa-wide.json
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -3 $W/gpu-check-small.log; tail -4 $W/engine.log; tail -30 $W/bench.log; grep -hE "^(gqa|wide) " $W/bench-*.log; grep -h median $W/sdpa-*.log
