# The rank cap at 64k (sourced after scripts/device-call.sh with a pack holding cur/ = main, the
# 6th from 2048 samples, and r64/ = exp/seed-rank6-64k, the 6th from 1024): `wide` certified at
# 65536 tokens over data seeds 13..52, the builds alternating within each draw (2-ab-more's
# steps with N=65536). At 64k the float model rescores 23.1% of tokens at the 4th and 28.9% at
# the 6th and overshoots about as often as at 128k, where the 4th repaired 30% of draws.
N=65536 source results/2026-12-07-seed-gap/2-ab-more/ab-more.sh
