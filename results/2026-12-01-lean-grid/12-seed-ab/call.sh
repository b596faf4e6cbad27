# Device call: each warp's bound seeded at its first chunks with the threshold of the chunk's
# sketch lower bounds (three Newton steps over registers), so fewer warm-up tokens are rescored:
# ENTKV_EXP_SEED = chunks seeded (0 = 28d2e8c's pass), same binary (c6d46b0 + wip.diff), two
# alternating rounds; `peaked` 1M through bundles made with 0 and 2.
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T128="--tile 256,1,2,2,3,2,256,2048 --tile 256,1,4,2,3,2,256,2048"
T32="--tile 128,1,4,2,0,2,256,2048 --tile 256,1,2,2,3,2,256,2048"
for round in 1 2; do
  for v in 0 1 2; do
    export ENTKV_EXP_SEED=$v
    ph bp1m-$v-$round 120 $N bench-paper --method certified --n 1048576 --iters 20 $T1M
    ph bp128k-$v-$round 60 $N bench-paper --method certified --n 131072 --iters 30 $T128
    ph bp32k-$v-$round 60 $N bench-paper --method certified --n 32768 --iters 30 $T32
  done
done
unset ENTKV_EXP_SEED
for v in 0 2; do
  ph peaked-$v 90 $N bench --bundle .gpu/s/s/b$v --no-defaults --workload peaked --methods certified --n 131072,1048576 --iters 20 --check-samples 1
done
for f in $W/bp*.log; do echo "== $f"; grep -E "step|rror" $f | head -8; done
grep -E "certified  step" $W/peaked-*.log | head
