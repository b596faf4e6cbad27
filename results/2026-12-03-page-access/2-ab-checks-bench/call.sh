# Device call at 031c770: A/B of page_bounds with one KV head a block (v0 = 1f89e00's entkv)
# against several a block (v1 = 031c770's: 8 at `paper`), each benching its own untuned bundle
# (group 1) on paper and peaked at 128k and 1M (top-k, whose box pass did not change, as a
# control); v0 runs again last to bound drift. ncu of v1's page_bounds at paper 1M. Then, with
# 031c770's binaries: the runtime GPU test, the GPU suite (--small-only), the tuned benchmark
# run behind docs/benchmarks.md (scripts/bench-gpu.sh; the certified full walk now tuned on iid
# and peaked keys), the engine/C ABI checks, and `gqa` tuned and benched beside SDPA.
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
for v in 0 1 0; do
  for wl in paper peaked; do
    ph ab-v$v-$wl-$SECONDS 40 .gpu/s/var/entkv-v$v bench --bundle .gpu/s/var/b-v$v --no-defaults --workload $wl --n 131072,1048576 --methods topk,certified-pruned --check-samples 1 --out $W/ab-v$v-$wl-$SECONDS.json
  done
done
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph ncu-page-bounds-v1 90 ncu --clock-control none --kernel-name regex:page_bounds --launch-skip 3 --launch-count 1 --set full .gpu/s/var/entkv-v1 bench --bundle .gpu/s/var/b-v1 --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-bench-v1.json
snap
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 170 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
snap
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph engine 60 bash scripts/engine-gpu.sh $W/engine
snap
export CUDA_CACHE_PATH=/tmp/jc1
ph autotune-gqa 80 .gpu/s/autotune --alpha 1.5 --head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12 --no-cache --out /tmp/b-gqa
cp /tmp/b-gqa/manifest.json $W/bundle-manifest-gqa-tuned.json; xz -9c /tmp/b-gqa/tune-log.jsonl > $W/tune-log-gqa.jsonl.xz
ph bench-gqa 25 .gpu/s/entkv bench --bundle /tmp/b-gqa --no-defaults --workload gqa --n 32768,131072,1048576 --methods dense,topk,gaussian,certified,certified-pruned --out $W/bench-gqa-tuned.json
ph sdpa-gqa 20 python3 scripts/sdpa_baseline.py --workload gqa --batch 8 --heads 24 --kv-heads 12 --head-dim 32 --n 32768 131072 1048576 --out $W/sdpa-gqa.json
for f in $W/ab-*.log; do echo "== $f"; grep -E " step | page_bounds | page_score_box " $f | grep -v "^\[" | awk '{print $1, $2, $3, $(NF-3)}'; done
echo "== ncu v1"; grep -E "Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible" $W/ncu-page-bounds-v1.log | head -10
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log; tail -3 $W/engine.log; tail -24 $W/bench.log; grep -hE "^gqa " $W/bench-*.log; grep -h median $W/sdpa-*.log
