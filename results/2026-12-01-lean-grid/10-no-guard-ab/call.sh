# Device call: the score pass's chunk loop without its `c0 < c_end` guard (the loop runs over
# the chunks the split walks): ncu (9-ncu-source-28d2e8c) put half of the pass's stall samples
# on that guard's branch, waiting on the loads in flight. new = c3086ce + wip.diff, old =
# 28d2e8c (p), two alternating rounds; peaked 1M through each binary's untuned bundle; ncu source
# counters of the new pass at 1M.
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv; O=.gpu/s/p/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T128="--tile 256,1,2,2,3,2,256,2048 --tile 256,1,4,2,3,2,256,2048"
T32="--tile 128,1,4,2,0,2,256,2048"
for round in 1 2; do
  for v in p s; do
    E=$N; [ $v = p ] && E=$O
    ph bp1m-$v-$round 120 $E bench-paper --method certified --n 1048576 --iters 20 $T1M
    ph bp128k-$v-$round 60 $E bench-paper --method certified --n 131072 --iters 30 $T128
    ph bp32k-$v-$round 60 $E bench-paper --method certified --n 32768 --iters 30 $T32
  done
done
for v in p s; do
  ph peaked-$v 90 $N bench --bundle .gpu/s/$v/bundle --no-defaults --workload peaked --methods certified --n 1048576 --iters 20 --check-samples 1
done
ph ncu-src-1m 200 /usr/local/cuda/bin/ncu --clock-control none -k regex:"select_certified" -c 1 --section SourceCounters --section WarpStateStats --page source --print-source sass --csv $N bench-paper --method certified --n 1048576 --iters 1 --tile 256,1,4,1,3,2,256,2048
xz -9 $W/ncu-src-1m.log
for f in $W/bp*.log; do echo "== $f"; grep -E "step|rror" $f | head -8; done
grep -E "certified  step" $W/peaked-*.log | head
