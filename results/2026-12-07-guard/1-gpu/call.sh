# Device call, any GPU (an H100 will do): the device-side id check (05cb53e) on the GPU, then its
# cost (steps.sh: the GPU suite with the `guard_ids` checks and the `engine guard_ids` rows, then
# `paper` timed with the check off and on). Carries .gpu/guard.txz (scripts/pack-gpu.sh).
PACK=.gpu/guard.txz; source scripts/device-call.sh
source results/2026-12-07-guard/1-gpu/steps.sh
