# Device call at bfae77f. On an H200: the suite and the docs/benchmarks.md runs (as
# 3-h200-bench). On any other GPU: the certified family alone tuned for `paper` and `gqa`
# (`--kernels decode_certified --no-cache`: every seeded and unseeded candidate timed in one
# process, tune logs kept), then each tuned bundle's certified step at 32k / 128k / 1M.
PACK=.gpu/one.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
cp .gpu/s/entkv .gpu/s/autotune .gpu/
if grep -q H200 $W/nvidia-smi.txt; then
  ph gpu-check-small 120 .gpu/entkv gpu-check --small-only --out $W/gpu-check
  snap
  grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
  ph bench 200 bash scripts/bench-gpu.sh $W/bench
  snap
  ph workloads $((585 - SECONDS)) bash scripts/bench-workloads.sh $W
  exit 0
fi
for w in paper gqa; do
  export CUDA_CACHE_PATH=/tmp/jc-$w
  if [ $w = paper ]; then shape=(--head-dim 32); else shape=(--head-dim 32 --kv-dtype bf16 --q-heads 24 --kv-heads 12); fi
  ph tune-$w 150 .gpu/autotune --alpha 1.5 "${shape[@]}" --kernels decode_certified --no-cache --out /tmp/b-$w
  xz -9c /tmp/b-$w/tune-log.jsonl >$W/tune-log-$w.jsonl.xz; cp /tmp/b-$w/manifest.json $W/manifest-$w.json
  ph bench-$w 60 .gpu/entkv bench --bundle /tmp/b-$w --workload $w --methods certified --out $W/bench-$w.json
  snap
done
