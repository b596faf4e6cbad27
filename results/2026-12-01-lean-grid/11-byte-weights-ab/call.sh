# Device call: one-byte query weights on the round-robin pass (1-ab measured them only together
# with page-consecutive tokens): ENTKV_EXP_W8=1 (8 dp4a and 8 weight registers a token fewer,
# a bound ~8% wider) against 0 (= 28d2e8c's pass), same binary (c0bb1c0 + wip.diff), two
# alternating rounds; also 8-token tiles (t256 r8 m2, t128 r8 m4).
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048 --tile 256,1,8,1,2,2,256,2048 --tile 128,1,8,1,4,4,256,2048"
T128="--tile 256,1,2,2,3,2,256,2048 --tile 256,1,4,2,3,2,256,2048 --tile 128,1,8,2,4,4,256,2048"
T32="--tile 128,1,4,2,0,2,256,2048"
for round in 1 2; do
  for v in 0 1; do
    export ENTKV_EXP_W8=$v
    ph bp1m-$v-$round 120 $N bench-paper --method certified --n 1048576 --iters 20 $T1M
    ph bp128k-$v-$round 60 $N bench-paper --method certified --n 131072 --iters 30 $T128
    ph bp32k-$v-$round 60 $N bench-paper --method certified --n 32768 --iters 30 $T32
  done
done
for f in $W/bp*.log; do echo "== $f"; grep -E "step|rror" $f | head -8; done
