# Device call at 53ddeaf (kernels as HEAD), on an H200 only: the GPU suite, so that the kernel
# change has run on the H200 (5-final ran it on an H100). On any other GPU it stops.
PACK=.gpu/one.txz; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then echo "not an H200: nothing run"; exit 0; fi
ph gpu-check-small 150 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
