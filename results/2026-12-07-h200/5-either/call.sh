# Device call, either card. Carries .gpu/rank.txz (cur/ = 05cb53e, r6/ = ba7141d, see 4-either;
# from 22:35 also r5/ = exp/seed-rank5, the 5th largest from 2048 samples; 15.5 MB).
# - On an H200: the docs run's `gqa`/`wide` half (`docs_run workloads`, ~390 s).
# - On any other card: the rank-cap A/B over 40 more draws
#   (results/2026-12-07-seed-gap/2-ab-more, ~200 s with three builds); 4-either ran the id check's steps and the
#   first six draws on an H100.
PACK=.gpu/rank.txz BUILD=cur; source scripts/device-call.sh
if grep -q H200 "$W/nvidia-smi.txt"; then
  docs_run workloads
else
  source results/2026-12-07-seed-gap/2-ab-more/ab-more.sh
fi
