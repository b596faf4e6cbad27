# Device call at 53ddeaf (kernels as HEAD ca8c3fa), on an H200 only: the GPU suite (the stream
# tightening change ran it on H100s only) and then `gqa` and `wide` autotuned and benched beside
# torch SDPA (scripts/bench-workloads.sh) for docs/benchmarks.md. On any other GPU it stops.
PACK=.gpu/one.txz; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then echo "not an H200: nothing run"; exit 0; fi
ph gpu-check-small 150 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
BIN=.gpu/s ph workloads 400 scripts/bench-workloads.sh $W gqa wide
