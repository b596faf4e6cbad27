# Device call at e20b3b9: the page box sketch read with dp4a by page_bounds (certified pruning):
# the runtime GPU test, the GPU suite (--small-only: page_meta's box codes, the pruned checks
# with BoxCorner keys), the tuned benchmark run (scripts/bench-gpu.sh), the engine/C ABI checks,
# then ncu of page_bounds at `paper` 1M (default tiles).
PACK=.gpu/a.txz; source scripts/device-call.sh
mkdir -p .gpu && cp -r .gpu/s/* .gpu/ 2>/dev/null
ph runtime-gpu 60 .gpu/s/runtime-gpu-tests --nocapture --test-threads=1
ph gpu-check-small 200 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }; snap
ph engine 90 bash scripts/engine-gpu.sh $W/engine
snap
ph ncu-page-bounds 60 ncu --clock-control none --kernel-name regex:page_bounds --launch-skip 3 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy .gpu/s/entkv bench --bundle .gpu/s/bundle --no-defaults --workload paper --n 1048576 --methods certified-pruned --iters 5 --warmup 2 --check-samples 1 --out $W/ncu-bench.json
grep -E "test result" $W/runtime-gpu.log; grep -cE " PASS " $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8; tail -2 $W/gpu-check-small.log; tail -3 $W/engine.log; tail -22 $W/bench.log; grep -E "Duration|Memory Throughput|DRAM Throughput|Registers|Achieved Occupancy" $W/ncu-page-bounds.log
