# Device call, either card. Carries .gpu/rank.txz (cur/ = 05cb53e, r6/ = ba7141d; see 4-either).
# - On an H200: the docs run's `gqa`/`wide` half (`docs_run workloads`, ~390 s).
# - On any other card: the rank-cap A/B over 40 more draws
#   (results/2026-12-07-seed-gap/2-ab-more, ~150 s); 4-either ran the id check's steps and the
#   first six draws on an H100.
PACK=.gpu/rank.txz BUILD=cur; source scripts/device-call.sh
if grep -q H200 "$W/nvidia-smi.txt"; then
  docs_run workloads
else
  source results/2026-12-07-seed-gap/2-ab-more/ab-more.sh
fi
