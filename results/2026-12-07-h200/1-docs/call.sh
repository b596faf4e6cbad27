# Device call for an H200 only: the benchmark run behind docs/benchmarks.md at ddb41b0 (main:
# `wide`'s certified defaults with `_im` planned for two CTAs an SM and the residual-norm bound,
# the seeded page-pruned walk; .gpu/docs.txz from scripts/pack-gpu.sh; tried at 661f66b with
# .gpu/ab.txz's old/ build this session, no H200 came), as results/2026-12-07-im/4-docs/call.sh:
# scripts/bench-gpu.sh (`paper` autotuned, paper, peaked, sweep, SDPA), `gqa` and `wide`
# autotuned and benched beside SDPA by scripts/bench-workloads.sh, then the GPU suite. On any
# other card it records the card and stops.
# PART=paper runs only scripts/bench-gpu.sh (~200 s), PART=workloads the rest (~390 s), so each
# half fits what device time is left; each half keeps its SDPA in its own call.
PACK=.gpu/docs.txz; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then
  echo "not an H200: $(cat $W/nvidia-smi.txt)"; exit 0
fi
cp -P .gpu/s/entkv .gpu/s/autotune .gpu/
PART=${PART:-all}
if [ "$PART" != workloads ]; then
  ph bench 200 bash scripts/bench-gpu.sh $W/bench
  snap
fi
[ "$PART" != paper ] || exit 0
ph workloads-gqa 150 bash scripts/bench-workloads.sh $W gqa
snap
ph workloads-wide 160 bash scripts/bench-workloads.sh $W wide
snap
ph gpu-check-small 80 .gpu/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
