# Device call at 53ddeaf, on an H200 only: `gqa` and `wide` autotuned and benched beside torch
# SDPA (scripts/bench-workloads.sh) for docs/benchmarks.md (`paper`'s PTX is unchanged since
# df04a1e, so its rows stand; the suite passed at 53ddeaf in 5-final). On any other GPU it stops.
PACK=.gpu/one.txz; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then echo "not an H200: nothing run"; exit 0; fi
BIN=.gpu/s ph workloads 420 scripts/bench-workloads.sh $W gqa wide
