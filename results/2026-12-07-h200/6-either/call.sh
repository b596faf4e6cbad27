# Device call for the next session, kind nvidia-h200 (either card may come). Carries
# .gpu/next.txz: cur/ = main with the 6th-largest rank cap from 128k and the device-side id check
# (e6b6550), r64/ = exp/seed-rank6-64k (8a54aea: the 6th from 64k); scripts/pack-gpu.sh
# .gpu/next.txz cur at main, then r64 at that branch.
# - On an H200: the docs run's `gqa`/`wide` half (`docs_run workloads`, ~390 s), whose kernels now
#   include the landed rank cap; then regenerate docs/benchmarks.md from 1-docs/out-paper and
#   this call's output.
# - On any other card: the landed rank cap's GPU steps (results/2026-12-07-seed-gap/3-landed,
#   ~80 s), then the rank cap's A/B at 64k (4-ab-64k, ~130 s).
PACK=.gpu/next.txz BUILD=cur; source scripts/device-call.sh
if grep -q H200 "$W/nvidia-smi.txt"; then
  docs_run workloads
else
  source results/2026-12-07-seed-gap/3-landed/steps.sh
  snap
  source results/2026-12-07-seed-gap/4-ab-64k/steps.sh
fi
