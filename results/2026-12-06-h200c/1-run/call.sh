# Device call at e4090bc since 2026-12-07 02:55 UTC (8ac9cfd and 3feea43 before). Their default
# PTX is the same (kernels as f7a63f8, seed samples in runs of four only from 2048 samples)
# except e4090bc's seed estimate kernel, which skips its sweeps for heads with too few samples.
# Since: 82bac86, least-tail split ties to fewer, longer splits; 8ac9cfd, the tuner checks
# candidates on a poisoned workspace; 43541a6, the tuner also times the seeded page-pruned walk
# (`_seed_pw`) in the pruned rows, so the tune logs are its first GPU A/B against the unseeded
# tiles. On an
# H200: the benchmark run behind docs/benchmarks.md
# (scripts/bench-gpu.sh: `paper` autotuned, paper, peaked, sweep, SDPA) and `gqa` and `wide`
# autotuned and benched beside SDPA (scripts/bench-workloads.sh), then the GPU suite.
PACK=.gpu/two.txz BUILD=main; source scripts/device-call.sh
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
