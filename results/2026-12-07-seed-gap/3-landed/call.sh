# Device call, any GPU: the landed rank cap (the 6th largest from 2048 samples, main at the
# commit in .gpu/landed.txz, scripts/pack-gpu.sh): the GPU suite (--small-only), then `wide`
# certified at 128k on the draws where 2-ab-more's cur (seeds 13, 15, 16) or r5 (26, 46)
# repaired, and two it did not (14, 17): the landed build should time as 2-ab-more's r6.
PACK=.gpu/landed.txz; source scripts/device-call.sh
source results/2026-12-07-seed-gap/3-landed/steps.sh
