# Device call, any GPU, for a session short of H200s: on an H200 the docs run's `gqa`/`wide` half
# (2-workloads' `docs_run workloads`, ~390 s) at 3087808, whose PTX is ddb41b0's (the commits
# since change the bench CLI and scripts only); on any other card the seed's rank-cap A/B
# (results/2026-12-07-seed-gap/1-ab, ~120 s). Carries .gpu/rank.txz (cur/ = 3087808,
# r6/ = ba7141d), so one pack serves both.
PACK=.gpu/rank.txz BUILD=cur; source scripts/device-call.sh
if grep -q H200 "$W/nvidia-smi.txt"; then
  docs_run workloads
else
  source results/2026-12-07-seed-gap/1-ab/ab.sh
fi
