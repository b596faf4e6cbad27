# Device call at 4be86d3: the page box sketch in one 64-byte block a (page, head) (call 2's two
# arrays ran page_bounds slower than meta_bounds), the certified decode tuned per walk (a
# `pruned` row searched on `peaked` keys): the runtime GPU test, the GPU suite (--small-only),
# the tuned benchmark run behind docs/benchmarks.md (scripts/bench-gpu.sh), the engine/C ABI
# checks, then `gqa` tuned and benched beside SDPA (`wide`: call 2; its benched methods do not
# read the page box sketch).
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph engine 90 bash scripts/engine-gpu.sh $W/engine
snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-gqa 80 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 30 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified --out $W/bench-gqa-tuned.json
ph sdpa-gqa 20 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log; tail -3 $W/engine.log; tail -22 $W/bench.log; grep -hE "^gqa " $W/bench-*.log; grep -h median $W/sdpa-*.log
