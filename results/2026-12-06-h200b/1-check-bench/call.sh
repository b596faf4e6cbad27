# Device call at ab58877 (kernels as bfae77f: gated pass CTAs return early; seed samples in runs of four), on an
# H200 only: the GPU suite, then the benchmark run behind docs/benchmarks.md
# (scripts/bench-gpu.sh: `paper` autotuned, paper, peaked, sweep, SDPA) and `gqa` and `wide`
# autotuned and benched beside SDPA (scripts/bench-workloads.sh). On any other GPU nothing.
PACK=.gpu/one.txz; source scripts/device-call.sh
snap(){ tar czf "$OUT/r.tgz" -C "$W" .; }
if ! grep -q H200 $W/nvidia-smi.txt; then echo "not an H200: nothing run"; exit 0; fi
cp .gpu/s/entkv .gpu/s/autotune .gpu/
ph gpu-check-small 120 .gpu/entkv gpu-check --small-only --out $W/gpu-check
snap
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph workloads $((585 - SECONDS)) bash scripts/bench-workloads.sh $W
