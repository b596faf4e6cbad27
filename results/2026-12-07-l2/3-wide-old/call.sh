# Device call, the same warm H100 right after 2-wide-new: `wide` tuned and benched beside torch
# SDPA at main (old/ = 661f66b of .gpu/ab.txz), the baseline of 2-wide-new. The command, inline
# in the call:
rm -rf /tmp/r; W=/tmp/r-old PACK=.gpu/ab.txz BUILD=old; source scripts/device-call.sh; cp -P .gpu/s/entkv .gpu/s/autotune .gpu/; ph workloads-wide 220 bash scripts/bench-workloads.sh $W wide
