# Device call with scripts/pack-gpu.sh's pack (eafb22d; kernels as bfae77f), on an H200 only:
# `wide` autotuned and benched beside torch SDPA (scripts/bench-workloads.sh) for
# docs/benchmarks.md (the device time left covered one workload). On any other GPU nothing.
PACK=.gpu/one.txz; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then echo "not an H200: nothing run"; exit 0; fi
BIN=.gpu/s ph workloads 180 scripts/bench-workloads.sh $W wide
