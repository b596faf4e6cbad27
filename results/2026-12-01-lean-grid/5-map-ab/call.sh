# Device call: two-byte query weights again (the one-byte ones widened the bound ~8%, and
# rescoring round trips are what a latency-bound pass waits on), odd nibbles in place, each
# token of the next chunk loaded right after the current one is scored; the token-to-lane
# mapping from ENTKV_EXP_MAP when the kernel is generated: 1 = a lane group takes consecutive
# tokens of one page (one lookup, constant offsets), 0 = round-robin (coalesced 512-byte
# rows, a lookup a token). new = b69402e + wip.diff; old = 738e1d0. Two alternating rounds.
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv; O=.gpu/s/o/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T128="--tile 256,1,4,2,3,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T32="--tile 256,1,2,2,3,2,256,2048 --tile 128,1,2,2,0,2,256,2048"
for round in 1 2; do
  for v in o 1 0; do
    E=$N; [ $v = o ] && E=$O
    export ENTKV_EXP_MAP=$v
    ph bp1m-$v-$round 120 $E bench-paper --method certified --n 1048576 --iters 20 $T1M
    ph bp128k-$v-$round 60 $E bench-paper --method certified --n 131072 --iters 30 $T128
    [ $round = 1 ] && ph bp32k-$v-$round 60 $E bench-paper --method certified --n 32768 --iters 30 $T32
  done
done
unset ENTKV_EXP_MAP
for v in o s; do
  ph peaked-$v 90 $N bench --bundle .gpu/s/$v/bundle --no-defaults --workload peaked --methods certified --n 1048576 --iters 20 --check-samples 1
done
for f in $W/bp*.log; do echo "== $f"; grep -E "step|rror" $f | head -8; done
grep -E "certified  step" $W/peaked-*.log | head
