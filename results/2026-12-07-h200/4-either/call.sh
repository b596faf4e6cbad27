# Device call, any GPU, for a session short of H200s. Carries .gpu/rank.txz: cur/ = 05cb53e
# (main with the device-side id check; every other kernel's PTX is ddb41b0's), r6/ = ba7141d
# (the seed's rank cap 6 at 128k).
# - On an H200: the docs run's `gqa`/`wide` half (2-workloads' `docs_run workloads`, ~390 s; its
#   closing GPU suite holds the id check's suite checks and `engine guard_ids` rows).
# - On any other card: the id check's GPU steps (results/2026-12-07-guard/1-gpu/steps.sh, one
#   round of the cost, ~130 s), then the seed's rank-cap A/B (results/2026-12-07-seed-gap/1-ab,
#   cur against r6, ~150 s).
PACK=.gpu/rank.txz BUILD=cur; source scripts/device-call.sh
if grep -q H200 "$W/nvidia-smi.txt"; then
  docs_run workloads
else
  ROUNDS=1 source results/2026-12-07-guard/1-gpu/steps.sh
  source results/2026-12-07-seed-gap/1-ab/ab.sh
fi
