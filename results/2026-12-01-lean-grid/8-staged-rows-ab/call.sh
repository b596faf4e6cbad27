# Device call: chunks staged in shared memory by async copies again (4-staged-ab's DSL
# statements, plus 4-byte copies), now with the round-robin mapping: a warp's copies of one
# token are 512 contiguous bytes (4-staged-ab copied 16 bytes of every 64). new = e28bb80 +
# wip.diff, staged unless ENTKV_EXP_STAGE=0 (then as 28d2e8c); old = 738e1d0. bench-paper at
# 1M / 128k / 32k; peaked 1M through the staged binary's untuned bundle; ncu of the staged pass.
PACK=.gpu/ab.txz; source scripts/device-call.sh
N=.gpu/s/s/entkv; O=.gpu/s/o/entkv
T1M="--tile 256,1,4,1,3,2,256,2048 --tile 256,1,4,2,2,2,256,2048 --tile 64,1,2,2,16,16,256,2048 --tile 128,1,4,2,6,6,256,2048"
T128="--tile 256,1,4,2,3,2,256,2048 --tile 256,1,2,2,3,2,256,2048 --tile 64,1,2,2,16,16,256,2048 --tile 128,1,4,2,6,6,256,2048"
T32="--tile 128,1,4,2,0,2,256,2048 --tile 256,1,2,2,3,2,256,2048"
for v in o 1 0; do
  E=$N; [ $v = o ] && E=$O
  export ENTKV_EXP_STAGE=$v
  ph bp1m-$v 120 $E bench-paper --method certified --n 1048576 --iters 20 $T1M
  ph bp128k-$v 60 $E bench-paper --method certified --n 131072 --iters 30 $T128
  ph bp32k-$v 60 $E bench-paper --method certified --n 32768 --iters 30 $T32
done
unset ENTKV_EXP_STAGE
ph peaked-s 90 $N bench --bundle .gpu/s/s/bundle --no-defaults --workload peaked --methods certified --n 1048576 --iters 20 --check-samples 1
ph ncu-1m 150 /usr/local/cuda/bin/ncu --clock-control none -k regex:"select_certified" -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy $N bench-paper --method certified --n 1048576 --iters 1 --tile 256,1,4,1,3,2,256,2048
for f in $W/bp*.log; do echo "== $f"; grep -E "step|rror" $f | head -8; done
grep -E "certified  step" $W/peaked-*.log | head
grep -E "Duration|Registers|Achieved Occ|DRAM Through|Issued Warp|Eligible|stalled|Block Limit" $W/ncu-*.log | head -20
