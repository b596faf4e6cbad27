# Device call: L2 prefetch of the sketch blocks a few chunks ahead (DSL prefetch_l2 =
# cp.async.bulk.prefetch.L2, one 320-byte block a page) on top of 2-interleave-ab's pass.
# new = b69402e + wip.diff, the distance from ENTKV_EXP_PREFETCH (chunks; 0 = none) read when
# the kernel is generated; old = 738e1d0. bench-paper at 1M / 128k / 32k; peaked 1M.
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv; O=.gpu/s/o/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T128="--tile 256,1,4,2,3,2,256,2048 --tile 64,1,2,2,16,16,256,2048"
T32="--tile 256,1,2,2,3,2,256,2048 --tile 128,1,2,2,0,2,256,2048"
for v in o 0 2 4 8; do
  E=$N; [ $v = o ] && E=$O
  export ENTKV_EXP_PREFETCH=$v
  ph bp1m-$v 120 $E bench-paper --method certified --n 1048576 --iters 20 $T1M
  ph bp128k-$v 60 $E bench-paper --method certified --n 131072 --iters 30 $T128
  ph bp32k-$v 60 $E bench-paper --method certified --n 32768 --iters 30 $T32
done
# The bundle's PTX was generated with the default distance, 2.
ph peaked-2 90 $N bench --bundle .gpu/s/s/bundle --no-defaults --workload peaked --methods certified --n 1048576 --iters 20 --check-samples 1
for f in $W/bp*.log; do echo "== $f"; grep -E "step" $f | head -8; done
grep -E "certified  step" $W/peaked-*.log | head
