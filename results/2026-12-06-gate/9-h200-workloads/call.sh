# Device call at bfae77f (kernels as HEAD; a second try of 8-h200-workloads), on an H200 only: `gqa` and `wide` autotuned and
# benched beside torch SDPA (scripts/bench-workloads.sh) for docs/benchmarks.md (the device
# time left did not cover `paper` too). On any other GPU nothing.
PACK=.gpu/one.txz; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then echo "not an H200: nothing run"; exit 0; fi
BIN=.gpu/s ph workloads 330 scripts/bench-workloads.sh $W gqa wide
