# Device call, any GPU (an H100 will do: an A/B on one machine): the seed's rank cap at 128k over
# many input draws. Carries .gpu/rank.txz: cur/ = 3087808 (main: rank cap 4 below 4096 samples,
# so 4 at 128k), r6/ = ba7141d (exp/seed-rank6: SEED_LONG_SAMPLES 2048, so 6 at 128k). Only the
# seed estimate kernel differs. `wide`'s untuned default bundle of each build (its certified
# default is seeded), certified at 128k, float64-checked on a sampled head, 6 draws
# (`entkv bench --data-seed 7..12`), the builds alternating within each draw. A draw whose step
# repairs a pair should show as ~+60 us under cur (docs/perf-notes.md, "The seed's gap at
# 128k"). Then the GPU suite (--small-only) at r6, which landing it would need (~35 s).
PACK=.gpu/rank.txz BUILD=r6; source scripts/device-call.sh
source results/2026-12-07-seed-gap/1-ab/ab.sh
