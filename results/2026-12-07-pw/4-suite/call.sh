# Device call, any GPU, for a session with about four minutes of device time left: the GPU suite
# (--small-only) at e4090bc alone, the first GPU run of the seeded page-pruned walk's kernels
# (its `_pw` cases) and of e4090bc's seed estimate kernel.
PACK=.gpu/two.txz BUILD=main; source scripts/device-call.sh
ph gpu-check-small 90 .gpu/s/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
