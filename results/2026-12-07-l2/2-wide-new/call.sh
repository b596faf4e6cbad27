# Device call, run on the H100 that 1-ab left warm (its $W, /tmp/r, was reused, so the r.tgz it
# brought back held 1-ab's files too; those copies were removed here): `wide` tuned and benched
# beside torch SDPA at the l2-bound build (new/ = 21546a5 of .gpu/ab.txz), as the docs run takes
# it. The command, inline in the call:
PACK=.gpu/ab.txz BUILD=new; source scripts/device-call.sh; cp -P .gpu/s/entkv .gpu/s/autotune .gpu/; ph workloads-wide 220 bash scripts/bench-workloads.sh $W wide
