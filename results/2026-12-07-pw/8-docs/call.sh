# Device call at e5148c1 (.gpu/pw.txz, new/): on an H200, the benchmark run behind
# docs/benchmarks.md (results/2026-12-06-h200c/1-run/call.sh at this build: scripts/bench-gpu.sh,
# `paper` autotuned, paper, peaked, sweep, SDPA; `gqa` and `wide` autotuned and benched beside
# SDPA by scripts/bench-workloads.sh; then the GPU suite). Its tuner times the seeded
# page-pruned walk (`_seed_pw`) in the pruned rows, and `wide`'s pruned default is `_seed_pw`.
# On any other card it ran 7-ncu-wide/call.sh instead (08:18 UTC); from 08:30 it records the card
# and stops there.
PACK=.gpu/pw.txz BUILD=new; source scripts/device-call.sh
if ! grep -q H200 $W/nvidia-smi.txt; then
  # Not an H200: timings would not match docs/benchmarks.md's card, so record the card and stop.
  echo "not an H200: $(cat $W/nvidia-smi.txt)"; exit 0
fi
cp -P .gpu/s/entkv .gpu/s/autotune .gpu/
# Ordered so that a call cut short by the session's device time keeps the most: the `paper`
# benchmarks, `gqa`, `wide`, then the suite (its kernels passed 277/277 on an H100,
# results/2026-12-06-seed-run).
ph bench 200 bash scripts/bench-gpu.sh $W/bench
snap
ph workloads-gqa 180 bash scripts/bench-workloads.sh $W gqa
snap
ph workloads-wide 200 bash scripts/bench-workloads.sh $W wide
snap
ph gpu-check-small 120 .gpu/entkv gpu-check --small-only --out $W/gpu-check
grep -E '^gpu-check:' $W/gpu-check-small.log; grep -cE "^\[[0-9]+/[0-9]+\] PASS" $W/gpu-check-small.log; grep -E " FAIL " $W/gpu-check-small.log | head -8
